package bundle

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"time"

	"github.com/mensylisir/kubexm/bundle/tarz"
	"github.com/mensylisir/kubexm/engine/transport"
)

// Input is one file to pack: where it is and what it is.
type Input struct {
	Artifact
	Src string // path on this machine
}

// Pack writes the files of in to out (a .tar.gz, or a .tar.zst when out is
// named so: tarz), with manifest.json
// first and a SHA256SUMS after the files of each directory. Files are
// streamed: none is held in memory. The bundle is written beside out and
// renamed into place, so out is never half a bundle. Beside it goes
// out.sha256 in sha256sum's format, so `sha256sum -c` checks a copy after
// it was carried over. It returns the manifest and the bundle's sha256.
// sums, when not nil, gives the files' sums it recorded (the work
// directory's, written when the export's downloads were checked), so that
// a file is read once, into the bundle, where its sum is checked again.
func Pack(ctx context.Context, out string, m Manifest, in []Input, sums *transport.SumCache) (Manifest, string, error) {
	// Hash first: the manifest, at the start of the archive, needs the sums.
	seen := map[string]bool{}
	var files []Input
	for _, f := range in {
		p, err := ArtifactPath(f.Artifact)
		if err != nil {
			return m, "", err
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		f.Path = p
		sum, size, err := fileSum(ctx, f.Src, sums)
		if err != nil {
			return m, "", fmt.Errorf("%s: %w", p, err)
		}
		f.SHA256, f.Size = sum, size
		files = append(files, f)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	m.Format, m.FormatVersion = Format, FormatVersion
	m.Artifacts = make([]Artifact, len(files))
	for i, f := range files {
		m.Artifacts[i] = f.Artifact
	}
	manifest, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, "", err
	}
	manifest = append(manifest, '\n')

	tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*")
	if err != nil {
		return m, "", err
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	h := sha256.New()
	zw, err := tarz.NewWriter(out, io.MultiWriter(tmp, h))
	if err != nil {
		tmp.Close()
		return m, "", err
	}
	// Compressing runs beside reading and hashing the files.
	pr, pw := io.Pipe()
	compressed := make(chan error, 1)
	go func() {
		_, err := io.CopyBuffer(zw, pr, make([]byte, 1<<20))
		if err == nil {
			err = zw.Close()
		}
		pr.CloseWithError(err) // a failed compressor stops the writer
		compressed <- err
	}()
	tw := tar.NewWriter(pw)
	err = func() error {
		mtime := m.Created.UTC().Truncate(time.Second)
		if err := writeTarBytes(tw, ManifestName, manifest, mtime); err != nil {
			return err
		}
		dirs := map[string]bool{}
		for i, f := range files {
			dir := path.Dir(f.Path)
			if !dirs[dir] {
				dirs[dir] = true
				if err := writeTarDirs(tw, dir, dirs, mtime); err != nil {
					return err
				}
			}
			if err := writeTarFile(ctx, tw, f, mtime); err != nil {
				return err
			}
			// The directory's SHA256SUMS after its last file.
			if i == len(files)-1 || path.Dir(files[i+1].Path) != dir {
				if err := writeTarBytes(tw, path.Join(dir, SumsName), sumsFile(m.Artifacts, dir), mtime); err != nil {
					return err
				}
			}
		}
		return tw.Close()
	}()
	pw.CloseWithError(err)
	if cerr := <-compressed; err == nil {
		err = cerr
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return m, "", err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return m, "", err
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return m, "", err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if err := os.WriteFile(out+".sha256", []byte(sum+"  "+filepath.Base(out)+"\n"), 0o644); err != nil {
		return m, "", err
	}
	return m, sum, nil
}

func writeTarDirs(tw *tar.Writer, dir string, done map[string]bool, mtime time.Time) error {
	// Parents first, each once.
	var chain []string
	for d := dir; d != "." && d != "/"; d = path.Dir(d) {
		chain = append(chain, d)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		d := chain[i]
		if done[d+"/"] {
			continue
		}
		done[d+"/"] = true
		hdr := &tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
	}
	return nil
}

func writeTarBytes(tw *tar.Writer, name string, data []byte, mtime time.Time) error {
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: mtime, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

// fileSum is the sha256 and size of the regular file p, from sums when
// given.
func fileSum(ctx context.Context, p string, sums *transport.SumCache) (string, int64, error) {
	if sums == nil {
		return hashFile(ctx, p)
	}
	sum, err := sums.Sum(p)
	if err != nil {
		return "", 0, err
	}
	st, err := os.Stat(p)
	if err != nil {
		return "", 0, err
	}
	return sum, st.Size(), nil
}

// writeTarFile streams one file into the archive, checking that it is still
// the file that was hashed.
func writeTarFile(ctx context.Context, tw *tar.Writer, f Input, mtime time.Time) error {
	in, err := os.Open(f.Src)
	if err != nil {
		return err
	}
	defer in.Close()
	mode := int64(0o644)
	if f.Kind == "binary" {
		mode = 0o755
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.Path, Mode: mode, Size: f.Size, ModTime: mtime, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tw, h), transport.ContextReader(ctx, io.LimitReader(in, f.Size+1)))
	if err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	if n != f.Size || hex.EncodeToString(h.Sum(nil)) != f.SHA256 {
		return fmt.Errorf("%s changed while the bundle was written; run the export again", f.Src)
	}
	return nil
}
