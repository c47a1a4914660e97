// Command imgtool assembles a single-layer container image from local files
// and writes it as a docker-archive tarball (what `docker save` writes), which
// `ctr -n k8s.io images import` and `docker load` accept. No registry, daemon
// or network is involved, so kubexm's tests can make the images a cluster
// needs (pause, CoreDNS, flannel, busybox) on an offline machine.
//
// Usage:
//
//	imgtool -o OUT.tar -t REF [flags]
//
// Flags (the repeatable ones may be given any number of times):
//
//	-o OUT.tar              the tarball to write (written to OUT.tar.tmp, then renamed)
//	-t REF                  the image reference stored as its tag, e.g. registry.k8s.io/pause:3.10
//	-file SRC:DEST[:MODE]   put the host file SRC at DEST in the image, with octal MODE
//	                        (default: SRC's permission bits); repeatable
//	-dir SRC[:DEST]         put the tree under host directory SRC below DEST (default /);
//	                        modes, symlinks and hard links are kept; repeatable
//	-symlink DEST:TARGET    make DEST a symbolic link to TARGET; repeatable
//	-chown DEST:UID:GID     give DEST (already in the layer) the numeric owner UID:GID,
//	                        for an image whose user must write it; repeatable
//	-entrypoint JSON        the entrypoint as a JSON array, e.g. '["/pause"]'
//	-cmd JSON               the command (arguments) as a JSON array
//	-env KEY=VALUE          an environment variable; repeatable
//	-label KEY=VALUE        an image label; repeatable
//	-workdir DIR            the working directory
//	-user USER              the user (numeric UID[:GID] works without /etc/passwd)
//	-platform OS/ARCH[/VARIANT]  default linux/amd64
//	-created TIME           creation time, RFC 3339 or seconds since the epoch; also the
//	                        mtime of every file in the layer (default $SOURCE_DATE_EPOCH, else 0)
//
// Every file in the layer is owned by 0:0 (unless -chown says otherwise) and has the same mtime, and the
// entries are sorted, so the same inputs give the same tarball byte for byte.
// Parent directories that are not given are added with mode 0755.
package main

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// listFlag collects the values of a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// entry is one member of the layer, keyed by its path in the image
// (relative, no leading slash).
type entry struct {
	typ    byte   // tar.TypeReg, TypeDir, TypeSymlink or TypeLink
	mode   int64  // permission bits, including setuid/setgid/sticky
	src    string // host file for TypeReg
	target string // link target for TypeSymlink and TypeLink
	origin string // what put it here, for error messages
	uid    int    // numeric owner, 0 unless -chown
	gid    int
}

type layer map[string]*entry

// clean turns an image path into a tar member name: no leading slash, no
// "." or ".." elements. The root itself is "".
func clean(p string) (string, error) {
	c := path.Clean("/" + p)
	if strings.Contains(p, "\x00") {
		return "", fmt.Errorf("path %q has a NUL byte", p)
	}
	return strings.TrimPrefix(c, "/"), nil
}

func (l layer) add(p string, e *entry) error {
	if p == "" {
		if e.typ != tar.TypeDir {
			return fmt.Errorf("%s: cannot replace / with a non-directory", e.origin)
		}
		return nil
	}
	if old, ok := l[p]; ok {
		if old.typ == tar.TypeDir && e.typ == tar.TypeDir {
			old.mode = e.mode
			return nil
		}
		return fmt.Errorf("/%s is given twice: by %s and by %s", p, old.origin, e.origin)
	}
	l[p] = e
	return nil
}

func parseMode(s string) (int64, error) {
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m&^0o7777 != 0 {
		return 0, fmt.Errorf("mode %q: want octal permission bits such as 0755", s)
	}
	return int64(m), nil
}

func permBits(fi fs.FileInfo) int64 {
	m := int64(fi.Mode().Perm())
	if fi.Mode()&fs.ModeSetuid != 0 {
		m |= 0o4000
	}
	if fi.Mode()&fs.ModeSetgid != 0 {
		m |= 0o2000
	}
	if fi.Mode()&fs.ModeSticky != 0 {
		m |= 0o1000
	}
	return m
}

// addFile handles -file SRC:DEST[:MODE].
func (l layer) addFile(spec string) error {
	parts := strings.Split(spec, ":")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return fmt.Errorf("-file %q: want SRC:DEST[:MODE]", spec)
	}
	fi, err := os.Stat(parts[0])
	if err != nil {
		return fmt.Errorf("-file %q: %w", spec, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("-file %q: %s is not a regular file", spec, parts[0])
	}
	mode := permBits(fi)
	if len(parts) == 3 {
		if mode, err = parseMode(parts[2]); err != nil {
			return fmt.Errorf("-file %q: %w", spec, err)
		}
	}
	dest, err := clean(parts[1])
	if err != nil {
		return err
	}
	return l.add(dest, &entry{typ: tar.TypeReg, mode: mode, src: parts[0], origin: "-file " + spec})
}

// addDir handles -dir SRC[:DEST]: the tree below SRC, without following
// symbolic links, keeping hard links between files of the tree.
func (l layer) addDir(spec string) error {
	src, destRoot, _ := strings.Cut(spec, ":")
	if destRoot == "" {
		destRoot = "/"
	}
	root, err := clean(destRoot)
	if err != nil {
		return err
	}
	type inode struct{ dev, ino uint64 }
	seen := map[inode]string{}
	origin := "-dir " + spec
	// WalkDir visits in lexical order, so the first name of a hard-linked
	// file, which becomes the real file in the tar, is always the same.
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		dest, err := clean(path.Join(root, filepath.ToSlash(rel)))
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		e := &entry{mode: permBits(fi), origin: origin}
		switch {
		case fi.IsDir():
			e.typ = tar.TypeDir
		case fi.Mode()&fs.ModeSymlink != 0:
			e.typ = tar.TypeSymlink
			if e.target, err = os.Readlink(p); err != nil {
				return err
			}
			e.mode = 0o777
		case fi.Mode().IsRegular():
			e.typ, e.src = tar.TypeReg, p
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
				k := inode{uint64(st.Dev), st.Ino}
				if first, ok := seen[k]; ok {
					e.typ, e.src, e.target = tar.TypeLink, "", first
				} else {
					seen[k] = dest
				}
			}
		default:
			return fmt.Errorf("%s: %s is a %s, which imgtool does not copy", origin, p, fi.Mode().Type())
		}
		return l.add(dest, e)
	})
}

// addSymlink handles -symlink DEST:TARGET.
func (l layer) addSymlink(spec string) error {
	dest, target, ok := strings.Cut(spec, ":")
	if !ok || dest == "" || target == "" {
		return fmt.Errorf("-symlink %q: want DEST:TARGET", spec)
	}
	p, err := clean(dest)
	if err != nil {
		return err
	}
	return l.add(p, &entry{typ: tar.TypeSymlink, mode: 0o777, target: target, origin: "-symlink " + spec})
}

// chown handles -chown DEST:UID:GID for an entry -file, -dir or -symlink put
// in the layer (or a parent directory they made).
func (l layer) chown(spec string) error {
	parts := strings.Split(spec, ":")
	if len(parts) != 3 || parts[0] == "" {
		return fmt.Errorf("-chown %q: want DEST:UID:GID", spec)
	}
	p, err := clean(parts[0])
	if err != nil {
		return err
	}
	e, ok := l[p]
	if !ok {
		return fmt.Errorf("-chown %q: /%s is not in the image", spec, p)
	}
	uid, err1 := strconv.ParseUint(parts[1], 10, 31)
	gid, err2 := strconv.ParseUint(parts[2], 10, 31)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("-chown %q: want numeric UID and GID", spec)
	}
	e.uid, e.gid = int(uid), int(gid)
	return nil
}

// addParents adds the missing parent directories of every entry.
func (l layer) addParents() error {
	for p := range l {
		for dir := path.Dir(p); dir != "." && dir != "/"; dir = path.Dir(dir) {
			if e, ok := l[dir]; ok {
				if e.typ != tar.TypeDir {
					return fmt.Errorf("/%s (from %s) is not a directory, but /%s is below it", dir, e.origin, p)
				}
				continue
			}
			l[dir] = &entry{typ: tar.TypeDir, mode: 0o755, origin: "parent of /" + p}
		}
	}
	return nil
}

// write writes the layer as an uncompressed tar, entries sorted by name, so
// that directories come before what is in them.
func (l layer) write(w io.Writer, mtime time.Time) error {
	names := make([]string, 0, len(l))
	for p := range l {
		names = append(names, p)
	}
	sort.Strings(names)
	tw := tar.NewWriter(w)
	for _, p := range names {
		e := l[p]
		h := &tar.Header{
			Typeflag: e.typ,
			Name:     p,
			Mode:     e.mode,
			ModTime:  mtime,
			Uid:      e.uid,
			Gid:      e.gid,
		}
		switch e.typ {
		case tar.TypeDir:
			h.Name += "/"
		case tar.TypeSymlink, tar.TypeLink:
			h.Linkname = e.target
		}
		var f *os.File
		if e.typ == tar.TypeReg {
			var err error
			if f, err = os.Open(e.src); err != nil {
				return err
			}
			fi, err := f.Stat()
			if err != nil {
				f.Close()
				return err
			}
			h.Size = fi.Size()
		}
		// No Format: archive/tar writes USTAR, and PAX only for a name
		// too long for USTAR; names stay empty, uid and gid are 0 but for -chown.
		if err := tw.WriteHeader(h); err != nil {
			if f != nil {
				f.Close()
			}
			return fmt.Errorf("/%s: %w", p, err)
		}
		if f != nil {
			n, err := io.Copy(tw, f)
			f.Close()
			if err != nil {
				return fmt.Errorf("/%s: %w", p, err)
			}
			if n != h.Size {
				return fmt.Errorf("/%s: %s changed size while being read", p, e.src)
			}
		}
	}
	return tw.Close()
}

func parseTime(s string) (time.Time, error) {
	if s == "" {
		s = os.Getenv("SOURCE_DATE_EPOCH")
	}
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(n, 0).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("-created %q: want RFC 3339 or seconds since the epoch", s)
	}
	return t.UTC(), nil
}

func parseArgv(flagName, s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var argv []string
	if err := json.Unmarshal([]byte(s), &argv); err != nil {
		return nil, fmt.Errorf("-%s %q: want a JSON array of strings: %w", flagName, s, err)
	}
	return argv, nil
}

func run() error {
	var (
		out, ref, entrypoint, cmd, workdir, user, created string
		platform                                          = "linux/amd64"
		files, dirs, symlinks, chowns, envs, labels       listFlag
	)
	flag.StringVar(&out, "o", "", "the docker-archive tarball to write")
	flag.StringVar(&ref, "t", "", "the image reference to tag it with")
	flag.Var(&files, "file", "SRC:DEST[:MODE]: a host file at DEST in the image (repeatable)")
	flag.Var(&dirs, "dir", "SRC[:DEST]: a host directory tree below DEST (default /) (repeatable)")
	flag.Var(&symlinks, "symlink", "DEST:TARGET: a symbolic link (repeatable)")
	flag.Var(&chowns, "chown", "DEST:UID:GID: the numeric owner of DEST, which is in the image (repeatable)")
	flag.StringVar(&entrypoint, "entrypoint", "", `entrypoint as a JSON array, e.g. '["/pause"]'`)
	flag.StringVar(&cmd, "cmd", "", "command as a JSON array")
	flag.Var(&envs, "env", "KEY=VALUE environment variable (repeatable)")
	flag.Var(&labels, "label", "KEY=VALUE label (repeatable)")
	flag.StringVar(&workdir, "workdir", "", "working directory")
	flag.StringVar(&user, "user", "", "user, e.g. 65535:65535")
	flag.StringVar(&platform, "platform", platform, "OS/ARCH[/VARIANT]")
	flag.StringVar(&created, "created", "", "creation time and file mtime: RFC 3339 or epoch seconds (default $SOURCE_DATE_EPOCH, else 0)")
	flag.Parse()
	if flag.NArg() != 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if out == "" || ref == "" {
		return errors.New("-o and -t are required")
	}
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("-t %q: %w", ref, err)
	}
	plat := strings.Split(platform, "/")
	if len(plat) < 2 || len(plat) > 3 || plat[0] == "" || plat[1] == "" {
		return fmt.Errorf("-platform %q: want OS/ARCH[/VARIANT]", platform)
	}
	mtime, err := parseTime(created)
	if err != nil {
		return err
	}
	ep, err := parseArgv("entrypoint", entrypoint)
	if err != nil {
		return err
	}
	argv, err := parseArgv("cmd", cmd)
	if err != nil {
		return err
	}
	var labelMap map[string]string
	for _, kv := range labels {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("-label %q: want KEY=VALUE", kv)
		}
		if labelMap == nil {
			labelMap = map[string]string{}
		}
		labelMap[k] = v
	}
	for _, kv := range envs {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("-env %q: want KEY=VALUE", kv)
		}
	}

	l := layer{}
	for _, d := range dirs {
		if err := l.addDir(d); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := l.addFile(f); err != nil {
			return err
		}
	}
	for _, s := range symlinks {
		if err := l.addSymlink(s); err != nil {
			return err
		}
	}
	if len(l) == 0 {
		return errors.New("the image would be empty: give -file, -dir or -symlink")
	}
	if err := l.addParents(); err != nil {
		return err
	}
	for _, c := range chowns {
		if err := l.chown(c); err != nil {
			return err
		}
	}

	// The uncompressed layer goes to a temporary file next to the output;
	// go-containerregistry gzips it (without a timestamp) when it is written.
	layerFile, err := os.CreateTemp(filepath.Dir(out), ".imgtool-layer-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(layerFile.Name())
	if err := l.write(layerFile, mtime); err != nil {
		layerFile.Close()
		return err
	}
	if err := layerFile.Close(); err != nil {
		return err
	}
	lay, err := tarball.LayerFromFile(layerFile.Name())
	if err != nil {
		return err
	}

	cf := &v1.ConfigFile{
		Architecture: plat[1],
		OS:           plat[0],
		Created:      v1.Time{Time: mtime},
		Config: v1.Config{
			Entrypoint: ep,
			Cmd:        argv,
			Env:        envs,
			Labels:     labelMap,
			WorkingDir: workdir,
			User:       user,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	if len(plat) == 3 {
		cf.Variant = plat[2]
	}
	img, err := mutate.ConfigFile(empty.Image, cf)
	if err != nil {
		return err
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:   lay,
		History: v1.History{Created: v1.Time{Time: mtime}, CreatedBy: "kubexm test/artifacts/imgtool", Comment: ref},
	})
	if err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, out); err != nil {
		os.Remove(tmp)
		return err
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "imgtool: %s %s (manifest %s)\n", out, tag.String(), d)
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "imgtool:", err)
		os.Exit(1)
	}
}
