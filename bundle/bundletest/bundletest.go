// Package bundletest makes damaged offline bundles for the tests of the
// packages that read them.
package bundletest

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/mensylisir/kubexm/bundle/tarz"
)

// Each calls fn with every entry of the bundle at p, in order.
func Each(t testing.TB, p string, fn func(h *tar.Header, data []byte)) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := tarz.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		fn(h, data)
	}
}

// Rewrite copies the bundle at p to a new file, compressed as p is (by
// its name), passing every entry through edit (which may change the header
// and data, or drop the entry).
func Rewrite(t testing.TB, p string, edit func(h *tar.Header, data []byte) (*tar.Header, []byte)) string {
	t.Helper()
	var buf bytes.Buffer
	name := "bad.tar.gz"
	if tarz.IsZstdName(p) {
		name = "bad.tar.zst"
	}
	zw, err := tarz.NewWriter(name, &buf)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(zw)
	Each(t, p, func(h *tar.Header, data []byte) {
		h, data = edit(h, data)
		if h == nil {
			return
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	})
	tw.Close()
	zw.Close()
	out := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}
