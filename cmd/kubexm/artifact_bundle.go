package main

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/mensylisir/kubexm/engine/transport"
)

// An offline bundle is a .tar.gz of files laid out as the work directory
// lays out downloads, <component>/<version>/<arch>/<file>, with a
// SHA256SUMS in every such directory (so the download role reads a bundle
// directory as it reads any local directory) and manifest.json first,
// listing every file with its sha256 and size. Nothing here knows what the
// files are: the artifact-export playbook decides that.

const (
	bundleFormat        = "kubexm-offline-bundle"
	bundleFormatVersion = 1
	bundleManifestName  = "manifest.json"
	bundleSumsName      = "SHA256SUMS"
	// bundleMarker in an unpacked bundle's directory holds the bundle's
	// sha256 once every file was verified.
	bundleMarker = ".kubexm-bundle-verified"
)

// bundleManifest is manifest.json.
type bundleManifest struct {
	Format        string           `json:"format"`
	FormatVersion int              `json:"formatVersion"`
	Cluster       string           `json:"cluster"`
	KubexmVersion string           `json:"kubexmVersion"`
	Created       time.Time        `json:"created"`
	Artifacts     []bundleArtifact `json:"artifacts"`
}

// bundleArtifact is one file of a bundle.
type bundleArtifact struct {
	Component string `json:"component"`
	Version   string `json:"version"`
	Arch      string `json:"arch"`
	File      string `json:"file"`
	// Path is <component>/<version>/<arch>/<file>, slash-separated.
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// Kind is binary, archive or image.
	Kind string `json:"kind"`
	// Image is the name an image tarball gives the image (kind image).
	Image string `json:"image,omitempty"`
}

var bundleKinds = []string{"binary", "archive", "image"}

// artifactPath checks an artifact's coordinates and returns its path in
// the bundle (and the work directory).
func artifactPath(a bundleArtifact) (string, error) {
	for _, f := range []struct{ name, v string }{{"component", a.Component}, {"version", a.Version}, {"arch", a.Arch}, {"file", a.File}} {
		if f.v == "" {
			return "", fmt.Errorf("artifact %s/%s/%s/%s: empty %s", a.Component, a.Version, a.Arch, a.File, f.name)
		}
	}
	if strings.ContainsAny(a.Version+a.Arch+a.File, "/\\") {
		return "", fmt.Errorf("artifact %s: version, arch and file must not contain a slash (%q, %q, %q)", a.Component, a.Version, a.Arch, a.File)
	}
	p := path.Join(a.Component, a.Version, a.Arch, a.File)
	if err := checkBundlePath(p); err != nil {
		return "", err
	}
	if p != a.Component+"/"+a.Version+"/"+a.Arch+"/"+a.File {
		return "", fmt.Errorf("artifact %s/%s/%s/%s: not a clean path", a.Component, a.Version, a.Arch, a.File)
	}
	if a.File == bundleSumsName || p == bundleManifestName {
		return "", fmt.Errorf("artifact %s: the file name %s is reserved for the bundle", p, a.File)
	}
	if !slices.Contains(bundleKinds, a.Kind) {
		return "", fmt.Errorf("artifact %s: kind %q is not one of %s", p, a.Kind, strings.Join(bundleKinds, ", "))
	}
	return p, nil
}

// checkBundlePath refuses names that would leave the unpack directory.
func checkBundlePath(p string) error {
	if p == "" || !fs.ValidPath(p) || strings.Contains(p, "\\") || strings.HasPrefix(p, ".") && p != "." {
		return fmt.Errorf("%q is not a relative path inside the bundle", p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." || part == "." || strings.HasPrefix(part, ".") {
			return fmt.Errorf("%q is not a relative path inside the bundle", p)
		}
	}
	return nil
}

// bundleInput is one file to pack: where it is and what it is.
type bundleInput struct {
	bundleArtifact
	src string // path on this machine
}

// packBundle writes the files of in to out (a .tar.gz), with manifest.json
// first and a SHA256SUMS after the files of each directory. Files are
// streamed: none is held in memory. The bundle is written beside out and
// renamed into place, so out is never half a bundle. It returns the
// manifest and the bundle's sha256.
func packBundle(ctx context.Context, out string, m bundleManifest, in []bundleInput) (bundleManifest, string, error) {
	// Hash first: the manifest, at the start of the archive, needs the sums.
	seen := map[string]bool{}
	var files []bundleInput
	for _, f := range in {
		p, err := artifactPath(f.bundleArtifact)
		if err != nil {
			return m, "", err
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		f.Path = p
		sum, size, err := hashFile(ctx, f.src)
		if err != nil {
			return m, "", fmt.Errorf("%s: %w", p, err)
		}
		f.SHA256, f.Size = sum, size
		files = append(files, f)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	m.Format, m.FormatVersion = bundleFormat, bundleFormatVersion
	m.Artifacts = make([]bundleArtifact, len(files))
	for i, f := range files {
		m.Artifacts[i] = f.bundleArtifact
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
	gz, err := gzip.NewWriterLevel(io.MultiWriter(tmp, h), gzip.DefaultCompression)
	if err != nil {
		tmp.Close()
		return m, "", err
	}
	// Compressing runs beside reading and hashing the files.
	pr, pw := io.Pipe()
	compressed := make(chan error, 1)
	go func() {
		_, err := io.CopyBuffer(gz, pr, make([]byte, 1<<20))
		if err == nil {
			err = gz.Close()
		}
		pr.CloseWithError(err) // a failed compressor stops the writer
		compressed <- err
	}()
	tw := tar.NewWriter(pw)
	err = func() error {
		mtime := m.Created.UTC().Truncate(time.Second)
		if err := writeTarBytes(tw, bundleManifestName, manifest, mtime); err != nil {
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
				if err := writeTarBytes(tw, path.Join(dir, bundleSumsName), sumsFile(m.Artifacts, dir), mtime); err != nil {
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
	return m, hex.EncodeToString(h.Sum(nil)), nil
}

// sumsFile is the SHA256SUMS of dir: sha256sum's format, sorted by name.
func sumsFile(arts []bundleArtifact, dir string) []byte {
	var b strings.Builder
	for _, a := range arts {
		if path.Dir(a.Path) == dir {
			fmt.Fprintf(&b, "%s  %s\n", a.SHA256, path.Base(a.Path))
		}
	}
	return []byte(b.String())
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

// writeTarFile streams one file into the archive, checking that it is still
// the file that was hashed.
func writeTarFile(ctx context.Context, tw *tar.Writer, f bundleInput, mtime time.Time) error {
	in, err := os.Open(f.src)
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
		return fmt.Errorf("%s changed while the bundle was written; run the export again", f.src)
	}
	return nil
}

func hashFile(ctx context.Context, p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	if !st.Mode().IsRegular() {
		return "", 0, fmt.Errorf("%s is not a regular file", p)
	}
	h := sha256.New()
	n, err := io.Copy(h, transport.ContextReader(ctx, f))
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// bundleError is a bundle that cannot be used, naming the bundle and, when
// there is one, the file inside it.
type bundleError struct {
	bundle, file, msg string
}

func (e *bundleError) Error() string {
	if e.file != "" {
		return fmt.Sprintf("offline bundle %s: %s: %s", e.bundle, e.file, e.msg)
	}
	return fmt.Sprintf("offline bundle %s: %s", e.bundle, e.msg)
}

// openBundle makes the bundle at p usable: it verifies manifest.json and
// every file's sha256 and size, unpacks it once into
// <workDir>/bundle/<sha256 of the bundle>/ and returns that directory. A
// bundle unpacked and verified before is not unpacked again (the sizes and
// SHA256SUMS are checked against its manifest; the download role checks
// each file's sum when it uses it). Nothing is left behind when the bundle
// is bad.
func openBundle(ctx context.Context, p, workDir string, logf func(string, ...any)) (string, *bundleManifest, error) {
	start := time.Now()
	sum, _, err := hashFile(ctx, p)
	if err != nil {
		return "", nil, fmt.Errorf("offline bundle: %w", err)
	}
	root := filepath.Join(workDir, "bundle")
	dir := filepath.Join(root, sum)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", nil, err
	}
	// Another kubexm (a --check run, or a run of another cluster file with
	// the same work dir) may be unpacking or using the same bundle: the
	// check and the replacement of a broken copy happen under one lock, so
	// a copy that another run verified is never removed.
	unlock, err := lockFile(filepath.Join(root, ".lock"))
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
	m, err := unpackBundle(ctx, p, tmp)
	if err != nil {
		return "", nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, bundleMarker), []byte(sum+"\n"), 0o644); err != nil {
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

// checkUnpacked accepts a directory that openBundle finished for the bundle
// with this sum, when no file went missing or changed size since.
func checkUnpacked(dir, sum string) (*bundleManifest, error) {
	mark, err := os.ReadFile(filepath.Join(dir, bundleMarker))
	if err != nil || strings.TrimSpace(string(mark)) != sum {
		return nil, errors.New("not unpacked")
	}
	data, err := os.ReadFile(filepath.Join(dir, bundleManifestName))
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
		sums, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(path.Dir(a.Path)), bundleSumsName))
		if err != nil || string(sums) != string(sumsFile(m.Artifacts, path.Dir(a.Path))) {
			return nil, errors.New("changed")
		}
	}
	return m, nil
}

func parseManifest(data []byte) (*bundleManifest, error) {
	var m bundleManifest
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("not a valid manifest: %v", err)
	}
	if m.Format != bundleFormat {
		return nil, fmt.Errorf("format %q is not %s", m.Format, bundleFormat)
	}
	if m.FormatVersion != bundleFormatVersion {
		return nil, fmt.Errorf("format version %d; this kubexm reads version %d bundles", m.FormatVersion, bundleFormatVersion)
	}
	seen := map[string]bool{}
	for _, a := range m.Artifacts {
		p, err := artifactPath(a)
		if err != nil {
			return nil, err
		}
		if p != a.Path {
			return nil, fmt.Errorf("artifact %s: path %q does not match its component, version, arch and file", p, a.Path)
		}
		if seen[p] {
			return nil, fmt.Errorf("artifact %s is listed twice", p)
		}
		seen[p] = true
		if b, err := hex.DecodeString(a.SHA256); err != nil || len(b) != sha256.Size || a.SHA256 != strings.ToLower(a.SHA256) {
			return nil, fmt.Errorf("artifact %s: sha256 %q is not 64 lower-case hex digits", p, a.SHA256)
		}
		if a.Size < 0 {
			return nil, fmt.Errorf("artifact %s: negative size", p)
		}
	}
	return &m, nil
}

// unpackBundle reads the bundle once, writing its files under dir while
// hashing them, and checks everything against manifest.json: every listed
// file present with its sha256 and size, nothing unlisted, every
// SHA256SUMS agreeing with the manifest.
func unpackBundle(ctx context.Context, p, dir string) (*bundleManifest, error) {
	bad := func(file, format string, args ...any) error {
		return &bundleError{bundle: p, file: file, msg: fmt.Sprintf(format, args...)}
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("offline bundle: %w", err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(transport.ContextReader(ctx, f))
	if err != nil {
		return nil, bad("", "not a gzip file: %v", err)
	}
	// Decompressing runs beside hashing and writing: on two cores that
	// takes a third off the time.
	pr, pw := io.Pipe()
	defer pr.Close() // stops the decompressor when this returns early
	go func() {
		_, err := io.CopyBuffer(pw, gz, make([]byte, 1<<20))
		pw.CloseWithError(err)
	}()
	tr := tar.NewReader(pr)
	var m *bundleManifest
	want := map[string]bundleArtifact{}
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
		case name == bundleManifestName:
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
			if free, err := freeBytes(dir); err == nil && total > 0 && uint64(total) > free {
				return nil, bad("", "unpacking needs %d MiB in %s, which has %d MiB free; free some space, or give --workdir on a larger disk",
					total>>20, filepath.Dir(dir), free>>20)
			}
			if err := writeFileIn(dir, name, strings.NewReader(string(data)), 0o644); err != nil {
				return nil, err
			}
		case m == nil:
			return nil, bad(name, "comes before %s, which must come first: not a kubexm offline bundle", bundleManifestName)
		case path.Base(name) == bundleSumsName:
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
				return nil, bad(name, "not listed in %s", bundleManifestName)
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
	// The gzip trailer holds a CRC of everything: read to the end so a
	// damaged tail is caught too.
	if _, err := io.Copy(io.Discard, pr); err != nil {
		return nil, bad(last, "the bundle is truncated or corrupt after this file: %v", err)
	}
	if m == nil {
		return nil, bad("", "no %s: not a kubexm offline bundle", bundleManifestName)
	}
	var missing []string
	for _, a := range m.Artifacts {
		if !got[a.Path] {
			missing = append(missing, a.Path)
		}
	}
	if len(missing) > 0 {
		return nil, bad(missing[0], "listed in %s but missing from the bundle (%d of %d files missing: %s); the bundle is truncated or incomplete",
			bundleManifestName, len(missing), len(m.Artifacts), strings.Join(missing, ", "))
	}
	dirs := map[string]bool{}
	for _, a := range m.Artifacts {
		dirs[path.Dir(a.Path)] = true
	}
	for d := range dirs {
		s, ok := sums[d]
		if !ok {
			return nil, bad(path.Join(d, bundleSumsName), "missing from the bundle")
		}
		if string(s) != string(sumsFile(m.Artifacts, d)) {
			return nil, bad(path.Join(d, bundleSumsName), "does not match %s", bundleManifestName)
		}
	}
	for d := range sums {
		if !dirs[d] {
			return nil, bad(path.Join(d, bundleSumsName), "in a directory with no artifact of %s", bundleManifestName)
		}
	}
	return m, nil
}

// writeFileIn writes r to dir/name, creating the parents.
func writeFileIn(dir, name string, r io.Reader, mode os.FileMode) error {
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

// freeBytes is the space an unprivileged process may still use on the file
// system holding dir.
func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}
