package bundle

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mensylisir/kubexm/bundle/tarz"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/internal/flock"
)

// Open makes the bundle at p usable: it verifies manifest.json and
// every file's sha256 and size, unpacks it once into
// <workDir>/bundle/<sha256 of the bundle>/ and returns that directory. A
// bundle unpacked and verified before is not unpacked again (the sizes and
// SHA256SUMS are checked against its manifest; the download role checks
// each file's sum when it uses it). The bundle's own sum is read from the
// work directory's record while the file is unchanged (transport.SumCache). Nothing is left behind when the bundle
// is bad.
func Open(ctx context.Context, p, workDir string, logf func(string, ...any)) (string, *Manifest, error) {
	start := time.Now()
	// Recorded with the bundle's stat in the work directory: a re-run with
	// the same bundle file does not read it again.
	sum, err := transport.WorkDirSums(workDir).Sum(p)
	if err != nil {
		return "", nil, fmt.Errorf("offline bundle: %w", err)
	}
	return open(ctx, p, sum, workDir, start, logf)
}

// OpenHashed is Open for a caller that has just computed the sha256 of the
// bundle at p (an upload hashes the body as it stores it), so that the
// file, gigabytes, is not read once more for it.
func OpenHashed(ctx context.Context, p, sum, workDir string, logf func(string, ...any)) (string, *Manifest, error) {
	return open(ctx, p, sum, workDir, time.Now(), logf)
}

func open(ctx context.Context, p, sum, workDir string, start time.Time, logf func(string, ...any)) (string, *Manifest, error) {
	root := filepath.Join(workDir, "bundle")
	dir := filepath.Join(root, sum)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", nil, err
	}
	// Another kubexm (a --check run, or a run of another cluster file with
	// the same work dir) may be unpacking or using the same bundle: the
	// check and the replacement of a broken copy happen under one lock, so
	// a copy that another run verified is never removed.
	unlock, err := flock.Lock(ctx, filepath.Join(root, ".lock"))
	if err != nil {
		return "", nil, err
	}
	defer unlock()
	if m, err := checkUnpacked(dir, sum); err == nil {
		logf("offline bundle %s (sha256 %s): %d files, verified when unpacked in %s", p, sum, len(m.Artifacts), dir)
		return dir, m, nil
	}
	tmp, err := os.MkdirTemp(root, ".unpack-")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(tmp) // after the rename, a no-op
	m, err := unpack(ctx, p, tmp)
	if err != nil {
		return "", nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, verifiedMarker), []byte(sum+"\n"), 0o644); err != nil {
		return "", nil, err
	}
	// An older, unverified copy (an interrupted run) is replaced.
	if err := os.RemoveAll(dir); err != nil {
		return "", nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", nil, err
	}
	var total int64
	for _, a := range m.Artifacts {
		total += a.Size
	}
	logf("offline bundle %s (sha256 %s): %d files (%d MiB) verified and unpacked in %s in %s",
		p, sum, len(m.Artifacts), total>>20, dir, time.Since(start).Round(time.Millisecond))
	return dir, m, nil
}

// Verify reads the bundle at p through once and checks it as Open does
// (manifest.json first, every file's sha256 and size, nothing unlisted,
// every SHA256SUMS, the gzip trailer) without writing anything: a bundle
// from someone else (an upload to kubexm server) is known good before a
// byte of it is unpacked.
func Verify(ctx context.Context, p string) (*Manifest, error) {
	return unpack(ctx, p, "")
}

// checkUnpacked accepts a directory that Open finished for the bundle
// with this sum, when no file went missing or changed size since.
func checkUnpacked(dir, sum string) (*Manifest, error) {
	mark, err := os.ReadFile(filepath.Join(dir, verifiedMarker))
	if err != nil || strings.TrimSpace(string(mark)) != sum {
		return nil, errors.New("not unpacked")
	}
	data, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return nil, err
	}
	m, err := parseManifest(data)
	if err != nil {
		return nil, err
	}
	for _, a := range m.Artifacts {
		st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(a.Path)))
		if err != nil || st.Size() != a.Size {
			return nil, errors.New("changed")
		}
		sums, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(path.Dir(a.Path)), SumsName))
		if err != nil || string(sums) != string(sumsFile(m.Artifacts, path.Dir(a.Path))) {
			return nil, errors.New("changed")
		}
	}
	return m, nil
}

// unpack reads the bundle once, writing its files under dir (nowhere when
// dir is "") while hashing them, and checks everything against
// manifest.json: every listed file present with its sha256 and size,
// nothing unlisted, every SHA256SUMS agreeing with the manifest.
func unpack(ctx context.Context, p, dir string) (*Manifest, error) {
	bad := func(file, format string, args ...any) error {
		return &Error{Bundle: p, File: file, Msg: fmt.Sprintf(format, args...)}
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("offline bundle: %w", err)
	}
	defer f.Close()
	zr, err := tarz.NewReader(transport.ContextReader(ctx, f))
	if err != nil {
		return nil, bad("", "%v", err)
	}
	defer zr.Close()
	// Decompressing runs beside hashing and writing: on two cores that
	// takes a third off the time.
	pr, pw := io.Pipe()
	defer pr.Close() // stops the decompressor when this returns early
	go func() {
		_, err := io.CopyBuffer(pw, zr, make([]byte, 1<<20))
		pw.CloseWithError(err)
	}()
	tr := tar.NewReader(pr)
	var m *Manifest
	want := map[string]Artifact{}
	got := map[string]bool{}
	sums := map[string][]byte{}
	last := ""
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, bad(last, "the bundle is truncated or corrupt after this file: %v", err)
		}
		name := strings.TrimPrefix(hdr.Name, "./")
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := checkBundlePath(strings.TrimSuffix(name, "/")); err != nil {
				return nil, bad(hdr.Name, "%v", err)
			}
			continue
		case tar.TypeReg:
		default:
			return nil, bad(hdr.Name, "only files and directories may be in a bundle (type %q)", hdr.Typeflag)
		}
		if err := checkBundlePath(name); err != nil {
			return nil, bad(hdr.Name, "%v", err)
		}
		last = name
		switch {
		case name == ManifestName:
			if m != nil {
				return nil, bad(name, "listed twice")
			}
			if len(got) > 0 || len(sums) > 0 {
				return nil, bad(name, "must come first in the bundle")
			}
			data, err := io.ReadAll(io.LimitReader(tr, 64<<20))
			if err != nil {
				return nil, bad(name, "truncated: %v", err)
			}
			if m, err = parseManifest(data); err != nil {
				return nil, bad(name, "%v", err)
			}
			var total int64
			for _, a := range m.Artifacts {
				want[a.Path] = a
				total += a.Size
			}
			// A full disk is found before the first byte is written, not
			// halfway through gigabytes.
			if free, err := FreeBytes(dir); dir != "" && err == nil && total > 0 && uint64(total) > free {
				return nil, bad("", "unpacking needs %d MiB in %s, which has %d MiB free; free some space, or give --workdir on a larger disk",
					total>>20, filepath.Dir(dir), free>>20)
			}
			if err := writeFileIn(dir, name, strings.NewReader(string(data)), 0o644); err != nil {
				return nil, err
			}
		case m == nil:
			return nil, bad(name, "comes before %s, which must come first: not a kubexm offline bundle", ManifestName)
		case path.Base(name) == SumsName:
			data, err := io.ReadAll(io.LimitReader(tr, 16<<20))
			if err != nil {
				return nil, bad(name, "truncated: %v", err)
			}
			sums[path.Dir(name)] = data
			if err := writeFileIn(dir, name, strings.NewReader(string(data)), 0o644); err != nil {
				return nil, err
			}
		default:
			a, ok := want[name]
			if !ok {
				return nil, bad(name, "not listed in %s", ManifestName)
			}
			if got[name] {
				return nil, bad(name, "in the bundle twice")
			}
			if hdr.Size != a.Size {
				return nil, bad(name, "%d bytes, the manifest says %d", hdr.Size, a.Size)
			}
			h := sha256.New()
			mode := os.FileMode(0o644)
			if a.Kind == "binary" {
				mode = 0o755
			}
			err := writeFileIn(dir, name, io.TeeReader(tr, h), mode)
			if err != nil {
				var pe *fs.PathError
				if errors.As(err, &pe) {
					return nil, bad(name, "unpacking into %s: %v", dir, err)
				}
				return nil, bad(name, "the bundle is truncated or corrupt in this file: %v", err)
			}
			if have := hex.EncodeToString(h.Sum(nil)); have != a.SHA256 {
				return nil, bad(name, "sha256 %s, the manifest says %s: the bundle is corrupt", have, a.SHA256)
			}
			got[name] = true
		}
	}
	// gzip's trailer and zstd's frame checksums cover everything: read to
	// the end so a damaged tail is caught too.
	if _, err := io.Copy(io.Discard, pr); err != nil {
		return nil, bad(last, "the bundle is truncated or corrupt after this file: %v", err)
	}
	if m == nil {
		return nil, bad("", "no %s: not a kubexm offline bundle", ManifestName)
	}
	var missing []string
	for _, a := range m.Artifacts {
		if !got[a.Path] {
			missing = append(missing, a.Path)
		}
	}
	if len(missing) > 0 {
		return nil, bad(missing[0], "listed in %s but missing from the bundle (%d of %d files missing: %s); the bundle is truncated or incomplete",
			ManifestName, len(missing), len(m.Artifacts), strings.Join(missing, ", "))
	}
	dirs := map[string]bool{}
	for _, a := range m.Artifacts {
		dirs[path.Dir(a.Path)] = true
	}
	for d := range dirs {
		s, ok := sums[d]
		if !ok {
			return nil, bad(path.Join(d, SumsName), "missing from the bundle")
		}
		if string(s) != string(sumsFile(m.Artifacts, d)) {
			return nil, bad(path.Join(d, SumsName), "does not match %s", ManifestName)
		}
	}
	for d := range sums {
		if !dirs[d] {
			return nil, bad(path.Join(d, SumsName), "in a directory with no artifact of %s", ManifestName)
		}
	}
	return m, nil
}

// writeFileIn writes r to dir/name, creating the parents; with no dir it
// only reads r.
func writeFileIn(dir, name string, r io.Reader, mode os.FileMode) error {
	if dir == "" {
		_, err := io.Copy(io.Discard, r)
		return err
	}
	dest := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dest, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, r)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// FreeBytes is the space an unprivileged process may still use on the file
// system holding dir.
func FreeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}
