package transfer

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// extractTop unpacks the regular files at the top level of the tar archive
// (plain, gzip or bzip2; told by its first bytes), after dropping strip
// leading path components, into dir: each is written to a temporary file
// there and renamed over its name, so a reader of dir never sees half a
// file. Directories, links and deeper members are left out (so a member
// can never land outside dir). It returns how many files it wrote.
func extractTop(ctx context.Context, archive, dir string, strip int) (int, error) {
	f, err := os.Open(archive)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	magic, _ := br.Peek(3)
	var r io.Reader = br
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		gz, err := gzip.NewReader(br)
		if err != nil {
			return 0, err
		}
		defer gz.Close()
		r = gz
	case bytes.Equal(magic, []byte("BZh")):
		r = bzip2.NewReader(br)
	}
	tr := tar.NewReader(r)
	n := 0
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, fmt.Errorf("not a readable tar archive (plain, gzip or bzip2): %w", err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		name, ok := topName(hdr.Name, strip)
		if !ok {
			continue
		}
		if err := writeRenamed(tr, dir, name, hdr); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// topName is a member's name after dropping strip leading components, as
// GNU tar --strip-components counts them ("./" is one; a "." left after
// them is dropped), when exactly one component is left and none is "..".
func topName(member string, strip int) (string, bool) {
	parts := strings.Split(strings.TrimLeft(member, "/"), "/")
	if len(parts) <= strip || slices.Contains(parts, "..") {
		// GNU tar also refuses a member with "..", wherever it is.
		return "", false
	}
	var left []string
	for _, p := range parts[strip:] {
		if p != "" && p != "." {
			left = append(left, p)
		}
	}
	if len(left) != 1 {
		return "", false
	}
	return left[0], true
}

func writeRenamed(r io.Reader, dir, name string, hdr *tar.Header) error {
	tmp, err := os.CreateTemp(dir, "."+name+".unpack-*")
	if err != nil {
		return err
	}
	_, err = io.Copy(tmp, r)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), hdr.FileInfo().Mode().Perm())
	}
	if err == nil {
		// As tar does: the member's time, which is the release's.
		err = os.Chtimes(tmp.Name(), hdr.ModTime, hdr.ModTime)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
