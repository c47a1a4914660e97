// Package tarz is the compression of an offline bundle's tar stream:
// gzip, or zstd when the bundle is named .tar.zst or .tzst; a reader tells
// the two apart by their first bytes, whatever the file is called. The
// bundle package and the tests that make damaged bundles share it.
package tarz

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// zstdSuffixes are the names written with zstd.
var zstdSuffixes = []string{".tar.zst", ".tzst"}

// IsZstdName says whether a bundle named name is written with zstd.
func IsZstdName(name string) bool {
	name = strings.ToLower(name)
	for _, s := range zstdSuffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// NewWriter compresses what is written to it for a bundle named name.
func NewWriter(name string, w io.Writer) (io.WriteCloser, error) {
	if IsZstdName(name) {
		return zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedDefault))
	}
	return gzip.NewWriterLevel(w, gzip.DefaultCompression)
}

var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// MediaType names the compression of a bundle that begins with head, for
// an upload's Content-Type.
func MediaType(head []byte) string {
	if bytes.HasPrefix(head, zstdMagic) {
		return "application/zstd"
	}
	return "application/gzip"
}

// maxZstdWindow bounds the memory a bundle's frames may ask a reader for
// (kubexm server unpacks uploads): NewWriter's frames use 8 MiB.
const maxZstdWindow = 128 << 20

// NewReader reads the tar stream out of a bundle, gzip or zstd.
func NewReader(r io.Reader) (io.ReadCloser, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	head, err := br.Peek(len(zstdMagic))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	switch {
	case bytes.HasPrefix(head, gzipMagic):
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("not a readable gzip file: %w", err)
		}
		return gz, nil
	case bytes.HasPrefix(head, zstdMagic):
		zr, err := zstd.NewReader(br, zstd.WithDecoderMaxWindow(maxZstdWindow))
		if err != nil {
			return nil, fmt.Errorf("not a readable zstd file: %w", err)
		}
		return zr.IOReadCloser(), nil
	}
	return nil, errors.New("neither a gzip nor a zstd file: not a kubexm offline bundle (kubexm artifact export writes one)")
}
