package bundle

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/bundle/bundletest"
	"github.com/mensylisir/kubexm/bundle/tarz"
	"github.com/mensylisir/kubexm/engine/transport"
)

// testInputs writes a few artifacts under dir and returns them as pack
// inputs: a binary, an archive, an image tarball in images/<name>.
func testInputs(t *testing.T, dir string) []Input {
	t.Helper()
	arts := []Artifact{
		{Component: "kubernetes", Version: "1.33.13", Arch: "amd64", File: "kubelet", Kind: "binary"},
		{Component: "kubernetes", Version: "1.33.13", Arch: "amd64", File: "kubectl", Kind: "binary"},
		{Component: "etcd", Version: "v3.5.35", Arch: "arm64", File: "etcd-v3.5.35-linux-arm64.tar.gz", Kind: "archive"},
		{Component: "images/pause", Version: "3.10", Arch: "amd64", File: "pause-3.10-amd64.tar", Kind: "image", Image: "registry.k8s.io/pause:3.10"},
	}
	var in []Input
	for i, a := range arts {
		p := filepath.Join(dir, a.Component, a.Version, a.Arch, a.File)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		// Large enough to span several reads, different per file.
		data := bytes.Repeat([]byte{byte('a' + i)}, 200_000+i)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		in = append(in, Input{Artifact: a, Src: p})
	}
	return in
}

// bundleNames are the two compressions a bundle comes in.
var bundleNames = []string{"bundle.tar.gz", "bundle.tar.zst"}

func testBundle(t *testing.T, name string) (string, Manifest) {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, name)
	m, sum, err := Pack(context.Background(), out, Manifest{Cluster: "demo", KubexmVersion: "0.1.0", Created: time.Unix(1700000000, 0)}, testInputs(t, filepath.Join(dir, "work")), nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if h := sha256.Sum256(data); hex.EncodeToString(h[:]) != sum {
		t.Fatalf("Pack reported sha256 %s, the file has %x", sum, h)
	}
	if side, err := os.ReadFile(out + ".sha256"); err != nil || string(side) != sum+"  "+name+"\n" {
		t.Fatalf("%s.sha256: %q %v", name, side, err)
	}
	return out, m
}

// Pack compresses by the bundle's name; Open goes by the first bytes, so
// a bundle renamed still opens.
func TestBundleCompressionByName(t *testing.T) {
	for name, magic := range map[string][]byte{"bundle.tar.gz": {0x1f, 0x8b}, "bundle.tar.zst": {0x28, 0xb5, 0x2f, 0xfd}} {
		out, _ := testBundle(t, name)
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, magic) {
			t.Errorf("%s starts with % x, want % x", name, data[:4], magic)
		}
		renamed := filepath.Join(t.TempDir(), "carried-over.tar.gz")
		if err := os.WriteFile(renamed, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := Open(context.Background(), renamed, t.TempDir(), func(string, ...any) {}); err != nil {
			t.Errorf("%s renamed: %v", name, err)
		}
	}
}

func TestBundleRoundTrip(t *testing.T) {
	for _, name := range bundleNames {
		t.Run(name, func(t *testing.T) { testRoundTrip(t, name) })
	}
}

func testRoundTrip(t *testing.T, name string) {
	out, m := testBundle(t, name)
	if len(m.Artifacts) != 4 || m.Format != Format || m.FormatVersion != FormatVersion {
		t.Fatalf("manifest %+v", m)
	}
	// manifest.json first, every directory with its SHA256SUMS.
	names := tarNames(t, out)
	if names[0] != "manifest.json" {
		t.Fatalf("first entry %s", names[0])
	}
	for _, want := range []string{"kubernetes/1.33.13/amd64/SHA256SUMS", "etcd/v3.5.35/arm64/SHA256SUMS", "images/pause/3.10/amd64/SHA256SUMS"} {
		if !contains(names, want) {
			t.Errorf("no %s in %v", want, names)
		}
	}

	work := t.TempDir()
	var logs []string
	logf := func(f string, a ...any) { logs = append(logs, f) }
	dir, got, err := Open(context.Background(), out, work, logf)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(dir) != filepath.Join(work, "bundle") || len(got.Artifacts) != 4 || got.Cluster != "demo" {
		t.Fatalf("dir %s, manifest %+v", dir, got)
	}
	for _, a := range m.Artifacts {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(a.Path)))
		if err != nil {
			t.Fatal(err)
		}
		if h := sha256.Sum256(data); hex.EncodeToString(h[:]) != a.SHA256 || int64(len(data)) != a.Size {
			t.Errorf("%s: unpacked content differs", a.Path)
		}
	}
	// SHA256SUMS is what sha256sum -c reads (and the download role).
	sums, _ := os.ReadFile(filepath.Join(dir, "kubernetes/1.33.13/amd64/SHA256SUMS"))
	if lines := strings.Split(strings.TrimSpace(string(sums)), "\n"); len(lines) != 2 || !strings.HasSuffix(lines[0], "  kubectl") {
		t.Errorf("SHA256SUMS:\n%s", sums)
	}
	if st, _ := os.Stat(filepath.Join(dir, "kubernetes/1.33.13/amd64/kubelet")); st.Mode().Perm() != 0o755 {
		t.Errorf("binary mode %v", st.Mode())
	}

	// A second open finds it unpacked and verified.
	before := dirState(t, dir)
	if dir2, _, err := Open(context.Background(), out, work, logf); err != nil || dir2 != dir {
		t.Fatalf("second open: %s %v", dir2, err)
	}
	if !strings.Contains(logs[len(logs)-1], "verified when unpacked") || dirState(t, dir) != before {
		t.Errorf("second open unpacked again: %v", logs)
	}
	// A file that went missing since is unpacked again.
	os.Remove(filepath.Join(dir, "kubernetes/1.33.13/amd64/kubelet"))
	if _, _, err := Open(context.Background(), out, work, logf); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "kubernetes/1.33.13/amd64/kubelet")); err != nil || !strings.Contains(logs[len(logs)-1], "verified and unpacked") {
		t.Errorf("a damaged unpacked bundle was not unpacked again: %v %v", err, logs)
	}
}

func editManifest(t *testing.T, data []byte, f func(m *Manifest)) []byte {
	t.Helper()
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	f(&m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestBundleBad(t *testing.T) {
	for _, name := range bundleNames {
		t.Run(name, func(t *testing.T) { testBundleBad(t, name) })
	}
}

func testBundleBad(t *testing.T, name string) {
	good, _ := testBundle(t, name)
	const kubelet = "kubernetes/1.33.13/amd64/kubelet"
	keep := func(h *tar.Header, d []byte) (*tar.Header, []byte) { return h, d }
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(t.TempDir(), "truncated.tar.gz")
	os.WriteFile(truncated, raw[:len(raw)/2], 0o644)
	tail := filepath.Join(t.TempDir(), "tail.tar.gz")
	damaged := append([]byte{}, raw...)
	damaged[len(damaged)-6] ^= 0xff // gzip's trailer CRC; in zstd, the last block
	os.WriteFile(tail, damaged, 0o644)
	// The last byte: gzip's length of the data, zstd's checksum of it.
	check := filepath.Join(t.TempDir(), "check.tar.gz")
	damaged = append([]byte{}, raw...)
	damaged[len(damaged)-1] ^= 0xff
	os.WriteFile(check, damaged, 0o644)
	notGzip := filepath.Join(t.TempDir(), "plain.tar")
	os.WriteFile(notGzip, []byte("just text"), 0o644)

	cases := []struct {
		name, bundle string
		want         []string
	}{
		{"a changed byte", bundletest.Rewrite(t, good, func(h *tar.Header, d []byte) (*tar.Header, []byte) {
			if h.Name == kubelet {
				d = append([]byte{}, d...)
				d[1000] ^= 1
			}
			return h, d
		}), []string{kubelet, "sha256", "corrupt"}},
		{"a missing file", bundletest.Rewrite(t, good, func(h *tar.Header, d []byte) (*tar.Header, []byte) {
			if h.Name == kubelet {
				return nil, nil
			}
			return h, d
		}), []string{kubelet, "missing from the bundle"}},
		{"a wrong sum in the manifest", bundletest.Rewrite(t, good, func(h *tar.Header, d []byte) (*tar.Header, []byte) {
			if h.Name == "manifest.json" {
				d = editManifest(t, d, func(m *Manifest) {
					for i := range m.Artifacts {
						if m.Artifacts[i].Path == kubelet {
							m.Artifacts[i].SHA256 = strings.Repeat("0", 64)
						}
					}
				})
			}
			return h, d
		}), []string{kubelet, "sha256", "the manifest says 0000"}},
		{"a shorter file", bundletest.Rewrite(t, good, func(h *tar.Header, d []byte) (*tar.Header, []byte) {
			if h.Name == kubelet {
				d = d[:100]
			}
			return h, d
		}), []string{kubelet, "100 bytes, the manifest says"}},
		{"a SHA256SUMS disagreeing", bundletest.Rewrite(t, good, func(h *tar.Header, d []byte) (*tar.Header, []byte) {
			if h.Name == "kubernetes/1.33.13/amd64/SHA256SUMS" {
				d = []byte(strings.Repeat("1", 64) + "  kubelet\n")
			}
			return h, d
		}), []string{"kubernetes/1.33.13/amd64/SHA256SUMS", "does not match manifest.json"}},
		{"an unlisted file", bundletest.Rewrite(t, good, func(h *tar.Header, d []byte) (*tar.Header, []byte) {
			if h.Name == kubelet {
				h.Name = "kubernetes/1.33.13/amd64/kubeadm"
			}
			return h, d
		}), []string{"kubernetes/1.33.13/amd64/kubeadm", "not listed in manifest.json"}},
		{"a path out of the bundle", bundletest.Rewrite(t, good, func(h *tar.Header, d []byte) (*tar.Header, []byte) {
			if h.Name == kubelet {
				h.Name = "../../evil"
			}
			return h, d
		}), []string{"../../evil", "not a relative path inside the bundle"}},
		{"a symlink", bundletest.Rewrite(t, good, func(h *tar.Header, d []byte) (*tar.Header, []byte) {
			if h.Name == kubelet {
				return &tar.Header{Name: kubelet, Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}, nil
			}
			return h, d
		}), []string{kubelet, "only files and directories"}},
		{"manifest not first", bundletest.Rewrite(t, good, func(h *tar.Header, d []byte) (*tar.Header, []byte) {
			if h.Name == "manifest.json" {
				h.Name = "etc/manifest.json"
			}
			return h, d
		}), []string{"etc/manifest.json", "manifest.json, which must come first"}},
		{"a newer format", bundletest.Rewrite(t, good, func(h *tar.Header, d []byte) (*tar.Header, []byte) {
			if h.Name == "manifest.json" {
				d = editManifest(t, d, func(m *Manifest) { m.FormatVersion = 99 })
			}
			return h, d
		}), []string{"manifest.json", "format version 99"}},
		// More than any disk holds: refused before anything is written.
		{"larger than the free space", bundletest.Rewrite(t, good, func(h *tar.Header, d []byte) (*tar.Header, []byte) {
			if h.Name == "manifest.json" {
				d = editManifest(t, d, func(m *Manifest) { m.Artifacts[0].Size = 1 << 60 })
			}
			return h, d
		}), []string{"unpacking needs", "MiB free", "--workdir"}},
		{"truncated", truncated, []string{"truncated or corrupt"}},
		{"a damaged tail", tail, []string{"truncated or corrupt"}},
		{"a damaged last byte", check, []string{"truncated or corrupt"}},
		{"neither gzip nor zstd", notGzip, []string{"neither a gzip nor a zstd file"}},
		{"intact (control)", bundletest.Rewrite(t, good, keep), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Verify, which writes nothing, refuses what Open refuses (a
			// bundle too large for the disk for what it holds instead).
			_, verr := Verify(context.Background(), c.bundle)
			work := t.TempDir()
			_, _, err := Open(context.Background(), c.bundle, work, func(string, ...any) {})
			if (verr == nil) != (err == nil) || verr != nil && verr.Error() != err.Error() && c.name != "larger than the free space" {
				t.Errorf("Verify: %v; Open: %v", verr, err)
			}
			if c.want == nil {
				if err != nil {
					t.Fatalf("intact bundle refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			t.Log(err)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), c.bundle) {
				t.Errorf("error %q does not name the bundle", err)
			}
			// Nothing is left behind, not even a temporary directory (the
			// unpacking lock stays, empty).
			ents, _ := os.ReadDir(filepath.Join(work, "bundle"))
			ents = slices.DeleteFunc(ents, func(e os.DirEntry) bool { return e.Name() == ".lock" })
			if len(ents) != 0 {
				t.Errorf("left behind: %v", ents)
			}
			if _, err := os.Stat(filepath.Join(os.TempDir(), "..", "..", "evil")); err == nil {
				t.Error("a path escaped the bundle")
			}
		})
	}
}

func TestPackRefusesBadInputs(t *testing.T) {
	dir := t.TempDir()
	in := testInputs(t, dir)
	for _, c := range []struct {
		name string
		edit func(*Input)
		want string
	}{
		{"a missing file", func(b *Input) { b.Src = filepath.Join(dir, "nope") }, "no such file"},
		{"a dot-dot component", func(b *Input) { b.Component = "../x" }, "not a relative path"},
		{"a slash in the file", func(b *Input) { b.File = "a/b" }, "must not contain a slash"},
		{"an unknown kind", func(b *Input) { b.Kind = "chart" }, "kind \"chart\""},
		{"a reserved name", func(b *Input) { b.File = "SHA256SUMS" }, "reserved"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := append([]Input{}, in...)
			c.edit(&bad[0])
			out := filepath.Join(t.TempDir(), "b.tar.gz")
			_, _, err := Pack(context.Background(), out, Manifest{}, bad, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Error("a bundle was written")
			}
		})
	}
}

func tarNames(t *testing.T, p string) []string {
	t.Helper()
	var names []string
	bundletest.Each(t, p, func(h *tar.Header, _ []byte) {
		if h.Typeflag == tar.TypeReg {
			names = append(names, h.Name)
		}
	})
	return names
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// dirState lists paths, sizes and modification times under dir.
func dirState(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			b.WriteString(p + " " + fi.ModTime().String() + "\n")
		}
		return nil
	})
	return b.String()
}

// ParseList turns the export playbook's list into Pack's inputs, and
// refuses a list that would pack nothing or reach outside its work dir.
func TestParseList(t *testing.T) {
	list, in, err := ParseList([]byte(`{"cluster": "demo", "work_dir": "/w", "artifacts": [
		{"component": "kubernetes", "version": "v1.37.2", "arch": "amd64", "file": "kubelet", "kind": "binary", "ref": "ignored"},
		{"component": "images/pause", "version": "3.10", "arch": "amd64", "file": "pause.tar", "kind": "image", "ref": "registry.k8s.io/pause:3.10"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if list.Cluster != "demo" || len(in) != 2 || in[0].Src != "/w/kubernetes/v1.37.2/amd64/kubelet" || in[0].Image != "" ||
		in[1].Image != "registry.k8s.io/pause:3.10" || in[1].Src != "/w/images/pause/3.10/amd64/pause.tar" {
		t.Fatalf("%+v %+v", list, in)
	}
	for _, c := range []struct{ list, want string }{
		{`{"work_dir": "w", "artifacts": []}`, "no absolute work_dir"},
		{`{"work_dir": "/w", "artifacts": []}`, "no artifacts"},
		{`{"work_dir": "/w", "artifacts": [{"component": "..", "version": "1", "arch": "amd64", "file": "f", "kind": "binary"}]}`, "not a relative path"},
		{`{"work_dir": "/w", "artifacts": [{"component": "c", "version": "1", "arch": "amd64", "file": "f", "kind": "chart"}]}`, `kind "chart"`},
		{`[1]`, "cannot unmarshal"},
	} {
		if _, _, err := ParseList([]byte(c.list)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.list, err, c.want)
		}
	}
}

// Pack takes a file's sum from the work directory's records instead of
// reading the file twice, and still checks it as it packs the file: a
// record that lies (a file changed within its timestamps' granularity)
// fails the export; nothing is written.
func TestPackTrustsNoRecordBlindly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := testInputs(t, filepath.Join(dir, "work"))
	sums := transport.WorkDirSums(filepath.Join(dir, "work"))
	time.Sleep(2100 * time.Millisecond) // a record is written for a file whose ctime is 2 s old
	for _, f := range in {
		if _, err := sums.Sum(f.Src); err != nil {
			t.Fatal(err)
		}
	}
	recs, _ := filepath.Glob(filepath.Join(dir, "work", "sums", "*"))
	if len(recs) != len(in) {
		t.Fatalf("%d records for %d files", len(recs), len(in))
	}
	good := filepath.Join(dir, "good.tar.zst")
	m, _, err := Pack(context.Background(), good, Manifest{}, in, transport.WorkDirSums(filepath.Join(dir, "work")))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(context.Background(), good, t.TempDir(), func(string, ...any) {}); err != nil || len(m.Artifacts) != len(in) {
		t.Fatalf("the bundle packed from the records: %v", err)
	}
	for _, rec := range recs {
		b, err := os.ReadFile(rec)
		if err != nil {
			t.Fatal(err)
		}
		st, _, _ := strings.Cut(string(b), "\n")
		if err := os.WriteFile(rec, []byte(st+"\n"+strings.Repeat("0", 64)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	bad := filepath.Join(dir, "bad.tar.zst")
	_, _, err = Pack(context.Background(), bad, Manifest{}, in, transport.WorkDirSums(filepath.Join(dir, "work")))
	if err == nil || !strings.Contains(err.Error(), "changed while the bundle was written") {
		t.Fatalf("a lying record: %v", err)
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Error("a bundle was written")
	}
}

func TestCheckName(t *testing.T) {
	for name, ok := range map[string]bool{
		"bundle.tar.gz": true, "b.tgz": true, "b.TAR.ZST": true, "b.tzst": true, "bundle": true, "b.gz": true,
		"bundle.tar": false, "b.tar.xz": false, "b.zst": false, "b.tar.bz2": false, "b.zip": false,
	} {
		err := CheckName(name)
		if (err == nil) != ok {
			t.Errorf("%s: %v", name, err)
		}
		if err != nil && !strings.Contains(err.Error(), ".tar.zst") {
			t.Errorf("%s: the error names no name that works: %v", name, err)
		}
	}
	out := filepath.Join(t.TempDir(), "b.TAR.ZST")
	if _, _, err := Pack(context.Background(), out, Manifest{}, testInputs(t, t.TempDir()), nil); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(out); tarz.MediaType(data) != "application/zstd" {
		t.Error("b.TAR.ZST is not zstd")
	}
}
