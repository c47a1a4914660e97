// Package bundletest makes damaged offline bundles for the tests of the
// packages that read them.
package bundletest

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// isZstd tells a zstd bundle by its first bytes, as kubexm does.
func isZstd(t testing.TB, br *bufio.Reader) bool {
	t.Helper()
	head, err := br.Peek(4)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(head, []byte{0x28, 0xb5, 0x2f, 0xfd})
}

// Each calls fn with every entry of the bundle at p, in order.
func Each(t testing.TB, p string, fn func(h *tar.Header, data []byte)) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var r io.Reader
	if isZstd(t, br) {
		zr, err := zstd.NewReader(br)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		r = zr
	} else {
		gz, err := gzip.NewReader(br)
		if err != nil {
			t.Fatal(err)
		}
		r = gz
	}
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
	var zw io.WriteCloser = gzip.NewWriter(&buf)
	name := "bad.tar.gz"
	if strings.HasSuffix(p, ".tar.zst") {
		w, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		zw, name = w, "bad.tar.zst"
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
