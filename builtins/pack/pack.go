// Package pack provides pack and unpack: kubexm's archive of a set of
// files with a manifest of their checksums, optionally encrypted with a key
// the task names.
package pack

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
	"sort"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/mensylisir/kubexm/builtins/controlfs"
	"github.com/mensylisir/kubexm/engine/step"
)

// A pack archive is a .tar.gz whose first member is manifest.json: the
// format name, free metadata the playbook chooses, and every other member
// with its sha256 and size. Beside it, <archive>.sha256 holds the sha256 of
// the archive file as sha256sum writes it, so one changed byte anywhere is
// noticed before anything is read. With a key the whole .tar.gz is
// encrypted (crypt.go) and the checksum covers the encrypted file.

const packManifestName = "manifest.json"

// packManifest is manifest.json.
type packManifest struct {
	Format   string         `json:"format"`
	Created  time.Time      `json:"created"`
	Metadata map[string]any `json:"metadata"`
	Files    []packFile     `json:"files"`
}

type packFile struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	Mode   uint32 `json:"mode"`
}

type packBuiltin struct{}

func (packBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "pack",
		Summary: "Pack files of the control machine into a .tar.gz with a manifest and a sha256 file, optionally encrypted.",
		Doc: "Runs on the control machine whatever the host. Each entry of `files` is a file or a directory (taken " +
			"whole; only regular files, symbolic links are refused) stored under `name` in the archive. The first " +
			"member is manifest.json: `format`, `metadata` and every file with its sha256, size and mode. " +
			"`<dest>.sha256` gets the archive's sha256 in sha256sum's format. With `key_file` or `key_env` the " +
			"archive is encrypted with AES-256-GCM in 1 MiB chunks, the key derived from the key material by " +
			"PBKDF2-SHA256; the key is never shown. An existing dest is never overwritten. Relative paths are " +
			"taken under the cluster's work directory. The result holds `path`, `sha256`, `size`, `files` and `encrypted`.",
		Args: []step.Arg{
			{Name: "dest", Type: step.String, Required: true, Doc: "The archive to write on the control machine."},
			{Name: "files", Type: step.List, Required: true, Doc: "Entries {src: path on the control machine, name: path in the archive, optional: true when a missing src is left out instead of an error}."},
			{Name: "metadata", Type: step.Map, Doc: "Stored in manifest.json as metadata (unpack returns it)."},
			{Name: "format", Type: step.String, Default: "kubexm-archive", Doc: "Name of the archive's format, checked by unpack."},
			{Name: "key_file", Type: step.String, Doc: "Encrypt with the key in this file on the control machine."},
			{Name: "key_env", Type: step.String, Doc: "Encrypt with the key in this environment variable of kubexm."},
			{Name: "keep", Type: step.Int, Default: 0, Doc: "After packing, keep this many archives of dest's directory that match keep_glob (the last ones in name order, " +
				"so name them with a sortable stamp), removing the others with their .sha256 files; 0 keeps every one. The result's `removed` lists them."},
			{Name: "keep_glob", Type: step.String, Doc: "With keep: the archives' names (path.Match's syntax, e.g. `dc1-*.tar.gz`), which dest's must match."},
		},
		Examples: []string{"pack:\n  dest: backups/etcd-{{ .stamp }}.tar.gz\n  files:\n    - {src: backups/staging/snapshot.db, name: etcd/snapshot.db}\n    - {src: certs, name: pki}\n  metadata: {cluster: \"{{ .cluster_name }}\"}"},
	}
}

// packEntry is one file to pack.
type packEntry struct {
	src  string
	name string
	mode fs.FileMode
}

func (packBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	dest := controlfs.WorkPath(env, args.String("dest"))
	entries, err := packEntries(env, args.List("files"))
	if err != nil {
		return step.Result{}, err
	}
	key, err := loadKey(args.String("key_file"), args.String("key_env"), env)
	if err != nil {
		return step.Result{}, err
	}
	if _, err := os.Lstat(dest); err == nil {
		return step.Result{}, fmt.Errorf("pack: %s exists already; an archive is never overwritten", dest)
	}
	keep, glob := args.Int("keep"), args.String("keep_glob")
	if keep < 0 {
		return step.Result{}, fmt.Errorf("pack: keep %d is negative", keep)
	}
	if keep > 0 {
		if ok, err := path.Match(glob, filepath.Base(dest)); err != nil || !ok {
			return step.Result{}, fmt.Errorf("pack: keep_glob %q does not match the archive's name %s: give the pattern of the archives kept (e.g. name-*.tar.gz)", glob, filepath.Base(dest))
		}
	}
	data := map[string]any{"path": dest, "files": len(entries), "encrypted": key != nil}
	if env.Check {
		return step.Result{Changed: true, Msg: fmt.Sprintf("would pack %d files into %s", len(entries), dest), Data: data}, nil
	}
	m := packManifest{Format: args.String("format"), Created: time.Now().UTC(), Metadata: args.Map("metadata")}
	if m.Metadata == nil {
		m.Metadata = map[string]any{}
	}
	for _, e := range entries {
		sum, size, err := controlfs.FileSHA256(e.src)
		if err != nil {
			return step.Result{}, fmt.Errorf("pack: %w", err)
		}
		m.Files = append(m.Files, packFile{Name: e.name, SHA256: sum, Size: size, Mode: uint32(e.mode.Perm())})
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o700); err != nil {
		return step.Result{}, fmt.Errorf("pack: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".tmp*")
	if err != nil {
		return step.Result{}, fmt.Errorf("pack: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // harmless once renamed
	h := sha256.New()
	var out io.Writer = io.MultiWriter(f, h)
	var enc io.WriteCloser
	if key != nil {
		if enc, err = newEncryptWriter(out, key); err != nil {
			f.Close()
			return step.Result{}, fmt.Errorf("pack: %w", err)
		}
		out = enc
	}
	if err := writePack(ctx, out, m, entries); err != nil {
		f.Close()
		return step.Result{}, fmt.Errorf("pack %s: %w", dest, err)
	}
	if enc != nil {
		if err := enc.Close(); err != nil {
			f.Close()
			return step.Result{}, fmt.Errorf("pack: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return step.Result{}, fmt.Errorf("pack: %w", err)
	}
	st, err := f.Stat()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return step.Result{}, fmt.Errorf("pack: %w", err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if err := os.WriteFile(dest+".sha256", []byte(sum+"  "+filepath.Base(dest)+"\n"), 0o600); err != nil {
		return step.Result{}, fmt.Errorf("pack: %w", err)
	}
	if err := os.Rename(tmp, dest); err != nil {
		return step.Result{}, fmt.Errorf("pack: %w", err)
	}
	data["sha256"] = sum
	data["size"] = st.Size()
	if keep > 0 {
		removed, err := prune(filepath.Dir(dest), glob, keep)
		data["removed"] = removed
		if err != nil {
			return step.Result{}, fmt.Errorf("pack: packed %s, then keeping %d archives: %w", dest, keep, err)
		}
	}
	return step.Result{Changed: true, Msg: fmt.Sprintf("packed %d files into %s (sha256 %s)", len(entries), dest, sum), Data: data}, nil
}

// prune removes from dir the archives matching glob but the last keep in
// name order, and their .sha256 files.
func prune(dir, glob string, keep int) ([]any, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, de := range des {
		if ok, _ := path.Match(glob, de.Name()); ok && de.Type().IsRegular() {
			names = append(names, de.Name())
		}
	}
	sort.Strings(names)
	removed := []any{}
	for _, n := range names[:max(len(names)-keep, 0)] {
		p := filepath.Join(dir, n)
		for _, f := range []string{p, p + ".sha256"} {
			if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return removed, err
			}
		}
		removed = append(removed, p)
	}
	return removed, nil
}

// packEntries expands the files argument into regular files, sorted by name.
func packEntries(env *step.Env, items []any) ([]packEntry, error) {
	var out []packEntry
	seen := map[string]bool{}
	for i, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("pack: files[%d] is %T, want a mapping {src, name}", i, it)
		}
		src, _ := m["src"].(string)
		name, _ := m["name"].(string)
		if src == "" || name == "" {
			return nil, fmt.Errorf("pack: files[%d] needs src and name", i)
		}
		if err := safeMemberName(name); err != nil {
			return nil, fmt.Errorf("pack: files[%d]: %w", i, err)
		}
		src = controlfs.WorkPath(env, src)
		if optional, _ := m["optional"].(bool); optional {
			if _, err := os.Lstat(src); errors.Is(err, fs.ErrNotExist) {
				continue
			}
		}
		err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			if !d.Type().IsRegular() {
				return fmt.Errorf("%s is not a regular file", p)
			}
			rel, err := filepath.Rel(src, p)
			if err != nil {
				return err
			}
			member := path.Join(name, filepath.ToSlash(rel))
			if seen[member] || member == packManifestName {
				return fmt.Errorf("%s would be stored twice as %s", p, member)
			}
			seen[member] = true
			info, err := d.Info()
			if err != nil {
				return err
			}
			out = append(out, packEntry{src: p, name: member, mode: info.Mode()})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("pack: files[%d]: %w", i, err)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

func writePack(ctx context.Context, w io.Writer, m packManifest, entries []packEntry) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	mj, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: packManifestName, Mode: 0o600, Size: int64(len(mj)), ModTime: m.Created, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(mj); err != nil {
		return err
	}
	for i, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		f, err := os.Open(e.src)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: e.name, Mode: int64(e.mode.Perm()), Size: m.Files[i].Size, ModTime: m.Created, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			f.Close()
			return err
		}
		// The size was taken with the checksum: a file that changed since
		// fails here instead of packing something the manifest does not say.
		h := sha256.New()
		_, err = io.Copy(io.MultiWriter(tw, h), f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", e.src, err)
		}
		if hex.EncodeToString(h.Sum(nil)) != m.Files[i].SHA256 {
			return fmt.Errorf("%s changed while it was packed", e.src)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// safeMemberName refuses names that would leave the extraction directory.
func safeMemberName(name string) error {
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "\\") || path.Clean(name) != name ||
		name == ".." || strings.HasPrefix(name, "../") {
		return fmt.Errorf("unsafe archive member name %q", name)
	}
	return nil
}

type unpackBuiltin struct{}

func (unpackBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "unpack",
		Summary: "Verify an archive of pack (checksum, decryption, every file's sha256) and extract it on the control machine.",
		Doc: "Runs on the control machine whatever the host. The archive's sha256 must match `sha256` or, when that is " +
			"unset, the `<src>.sha256` file beside it; then it is decrypted when it is encrypted (`key_file` or `key_env` " +
			"needed), and every member is checked against manifest.json, whose `format` must be `format`. Nothing is " +
			"left in dest unless everything verified: the files are extracted beside it and renamed into place. " +
			"A dest that already holds this archive (same sha256) is left as it is. The result holds `manifest` " +
			"(format, created, metadata, files), `metadata`, `sha256` and `dest`.",
		Args: []step.Arg{
			{Name: "src", Type: step.String, Required: true, Doc: "The archive on the control machine."},
			{Name: "dest", Type: step.String, Required: true, Doc: "Directory on the control machine to extract into (replaced)."},
			{Name: "sha256", Type: step.String, Doc: "The archive's expected sha256; default: read from <src>.sha256."},
			{Name: "format", Type: step.String, Default: "kubexm-archive", Doc: "The format manifest.json must name."},
			{Name: "key_file", Type: step.String, Doc: "Decrypt with the key in this file on the control machine."},
			{Name: "key_env", Type: step.String, Doc: "Decrypt with the key in this environment variable of kubexm."},
		},
		Examples: []string{"unpack:\n  src: \"{{ .backup_file }}\"\n  dest: restore/current\nregister: backup"},
	}
}

// unpackMarker in an extracted directory records the archive's sha256.
const unpackMarker = ".kubexm-unpacked"

func (unpackBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	src := controlfs.WorkPath(env, args.String("src"))
	dest := controlfs.WorkPath(env, args.String("dest"))
	want := strings.ToLower(strings.TrimSpace(args.String("sha256")))
	if want == "" {
		b, err := os.ReadFile(src + ".sha256")
		if err != nil {
			return step.Result{}, fmt.Errorf("unpack: no checksum for %s: %w (hint: keep the .sha256 file beside the archive, or give sha256)", src, err)
		}
		if fields := strings.Fields(string(b)); len(fields) > 0 {
			want = strings.ToLower(fields[0])
		}
	}
	have, _, err := controlfs.FileSHA256(src)
	if err != nil {
		return step.Result{}, fmt.Errorf("unpack: %w", err)
	}
	if have != want {
		return step.Result{}, fmt.Errorf("unpack: %s is damaged or was changed: its sha256 is %s, the checksum says %s; refusing it", src, have, want)
	}
	key, err := loadKey(args.String("key_file"), args.String("key_env"), env)
	if err != nil {
		return step.Result{}, err
	}
	f, err := os.Open(src)
	if err != nil {
		return step.Result{}, fmt.Errorf("unpack: %w", err)
	}
	defer f.Close()
	var in io.Reader = f
	encrypted, err := isEncrypted(f)
	if err != nil {
		return step.Result{}, fmt.Errorf("unpack: %s: %w", src, err)
	}
	if encrypted {
		if key == nil {
			return step.Result{}, fmt.Errorf("unpack: %s is encrypted; give its key (key_file or key_env)", src)
		}
		if in, err = newDecryptReader(f, key); err != nil {
			return step.Result{}, fmt.Errorf("unpack: %s: %w", src, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dest, unpackMarker)); err == nil && strings.TrimSpace(string(b)) == have {
		m, err := readManifestFile(filepath.Join(dest, packManifestName))
		if err == nil {
			return unpackResult(false, dest, have, m), nil
		}
	}
	if env.Check {
		// Reading the whole archive checks it without writing anything.
		m, err := extractPack(ctx, in, "", args.String("format"))
		if err != nil {
			return step.Result{}, fmt.Errorf("unpack %s: %w", src, err)
		}
		r := unpackResult(true, dest, have, m)
		r.Msg = "would extract into " + dest
		return r, nil
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o700); err != nil {
		return step.Result{}, fmt.Errorf("unpack: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".tmp*")
	if err != nil {
		return step.Result{}, fmt.Errorf("unpack: %w", err)
	}
	defer os.RemoveAll(tmp) // harmless once renamed
	m, err := extractPack(ctx, in, tmp, args.String("format"))
	if err != nil {
		return step.Result{}, fmt.Errorf("unpack %s: %w", src, err)
	}
	if err := os.WriteFile(filepath.Join(tmp, unpackMarker), []byte(have+"\n"), 0o600); err != nil {
		return step.Result{}, fmt.Errorf("unpack: %w", err)
	}
	if err := os.RemoveAll(dest); err != nil {
		return step.Result{}, fmt.Errorf("unpack: %w", err)
	}
	if err := os.Rename(tmp, dest); err != nil {
		return step.Result{}, fmt.Errorf("unpack: %w", err)
	}
	return unpackResult(true, dest, have, m), nil
}

func unpackResult(changed bool, dest, sum string, m packManifest) step.Result {
	// Through JSON so that expressions see plain maps and lists.
	var mm map[string]any
	b, _ := json.Marshal(m)
	_ = json.Unmarshal(b, &mm)
	return step.Result{Changed: changed, Data: map[string]any{"dest": dest, "sha256": sum, "manifest": mm, "metadata": mm["metadata"]}}
}

func readManifestFile(p string) (packManifest, error) {
	var m packManifest
	b, err := os.ReadFile(p)
	if err != nil {
		return m, err
	}
	return m, json.Unmarshal(b, &m)
}

// extractPack reads a pack archive, checks every member against the
// manifest and, when dir is set, writes the members (and manifest.json)
// under dir.
func extractPack(ctx context.Context, r io.Reader, dir, format string) (packManifest, error) {
	var m packManifest
	gz, err := gzip.NewReader(r)
	if err != nil {
		return m, fmt.Errorf("not a pack archive (gzip: %w); a wrong key or a damaged file", err)
	}
	tr := tar.NewReader(gz)
	hdr, err := tr.Next()
	if err != nil || hdr.Name != packManifestName {
		return m, errors.New("not a pack archive: manifest.json is not its first member")
	}
	mj, err := io.ReadAll(io.LimitReader(tr, 64<<20))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(mj, &m); err != nil {
		return m, fmt.Errorf("manifest.json: %w", err)
	}
	if m.Format != format {
		return m, fmt.Errorf("the archive's format is %q, want %q", m.Format, format)
	}
	if dir != "" {
		if err := os.WriteFile(filepath.Join(dir, packManifestName), mj, 0o600); err != nil {
			return m, err
		}
	}
	want := map[string]packFile{}
	for _, pf := range m.Files {
		if err := safeMemberName(pf.Name); err != nil {
			return m, fmt.Errorf("manifest.json: %w", err)
		}
		want[pf.Name] = pf
	}
	got := map[string]bool{}
	for {
		if err := ctx.Err(); err != nil {
			return m, err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return m, fmt.Errorf("damaged archive: %w", err)
		}
		pf, ok := want[hdr.Name]
		if !ok || got[hdr.Name] || hdr.Typeflag != tar.TypeReg {
			return m, fmt.Errorf("member %q is not in manifest.json (or twice, or not a file)", hdr.Name)
		}
		got[hdr.Name] = true
		h := sha256.New()
		var w io.Writer = h
		var out *os.File
		if dir != "" {
			p := filepath.Join(dir, filepath.FromSlash(hdr.Name))
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				return m, err
			}
			if out, err = os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fs.FileMode(pf.Mode)&0o777); err != nil {
				return m, err
			}
			w = io.MultiWriter(out, h)
		}
		n, err := io.Copy(w, tr)
		if out != nil {
			if cerr := out.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return m, fmt.Errorf("%s: %w", hdr.Name, err)
		}
		if n != pf.Size || hex.EncodeToString(h.Sum(nil)) != pf.SHA256 {
			return m, fmt.Errorf("%s does not match its sha256 in manifest.json", hdr.Name)
		}
	}
	// The tar reader stops at its end marker; reading gzip to its end checks
	// the trailer's CRC too.
	if _, err := io.Copy(io.Discard, gz); err != nil {
		return m, fmt.Errorf("damaged archive: %w", err)
	}
	for name := range want {
		if !got[name] {
			return m, fmt.Errorf("%s is in manifest.json but not in the archive", name)
		}
	}
	return m, nil
}

// Builtins returns pack and unpack.
func Builtins() []step.Builtin { return []step.Builtin{packBuiltin{}, unpackBuiltin{}} }
