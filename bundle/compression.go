package bundle

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

// A bundle is a gzip-compressed tar unless its name ends in .tar.zst or
// .tzst: with zstd an export takes 0.4 of gzip's time, the unpacking half,
// and the bundle is 7 % smaller (docs/perf.md). gzip stays the default,
// as the offline bundle has always been a .tar.gz; a reader tells the two
// apart by their first bytes, whatever the file is called.

// zstdSuffixes are the names Pack compresses with zstd.
var zstdSuffixes = []string{".tar.zst", ".tzst"}

func isZstdName(name string) bool {
	name = strings.ToLower(name)
	for _, s := range zstdSuffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// otherArchives are the endings of names that promise an archive or a
// compression Pack does not write.
var otherArchives = []string{".tar", ".zst", ".xz", ".txz", ".bz2", ".tbz2", ".lz4", ".zip", ".7z"}

// CheckName refuses a bundle name whose ending says what the bundle would
// not be (bundle.tar.xz, bundle.tar): a file named so would hold gzip.
func CheckName(name string) error {
	lower := strings.ToLower(name)
	if isZstdName(lower) || strings.HasSuffix(lower, ".gz") || strings.HasSuffix(lower, ".tgz") {
		return nil
	}
	for _, s := range otherArchives {
		if strings.HasSuffix(lower, s) {
			return fmt.Errorf("%s: a bundle is a gzip-compressed tar (.tar.gz, .tgz) or a zstd-compressed one (.tar.zst, .tzst), not %s; name it so", name, s)
		}
	}
	return nil
}

// compressor is what Pack writes the tar stream of a bundle named out
// through.
func compressor(out string, w io.Writer) (io.WriteCloser, error) {
	if isZstdName(out) {
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
// (kubexm server unpacks uploads): Pack's frames use 8 MiB.
const maxZstdWindow = 128 << 20

// decompressor reads the tar stream out of a bundle, gzip or zstd.
func decompressor(r io.Reader) (io.ReadCloser, error) {
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
