package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"
)

// statScript prints what StatCommand reads: stat(1)'s raw mode in hex,
// size, mtime, owner and group names, then a symlink's target. Exit 3:
// no such path.
const statScript = `[ -e "$1" ] || [ -L "$1" ] || exit 3
stat -c '%f %s %Y %U %G' -- "$1" || exit 1
if [ -L "$1" ]; then readlink -- "$1"; fi`

// StatCommand reads p's metadata with stat(1) run on t through become: the
// way both transports reach paths their login user cannot. A missing path
// is a FileInfo with Exists false.
func StatCommand(ctx context.Context, t Transport, p string) (FileInfo, error) {
	res, err := t.Run(ctx, Command{Argv: []string{"/bin/sh", "-c", statScript, "sh", p}, Become: true})
	if err != nil {
		return FileInfo{}, err
	}
	if res.ExitCode == 3 {
		return FileInfo{}, nil
	}
	if res.ExitCode != 0 {
		return FileInfo{}, fmt.Errorf("%s: stat %s: %s", t.Host(), p, bytes.TrimSpace(res.Stderr))
	}
	info, err := parseStat(string(res.Stdout))
	if err != nil {
		return FileInfo{}, fmt.Errorf("%s: stat %s: %w", t.Host(), p, err)
	}
	return info, nil
}

// parseStat reads statScript's output.
func parseStat(out string) (FileInfo, error) {
	lines := strings.SplitN(strings.TrimRight(out, "\n"), "\n", 2)
	f := strings.Fields(lines[0])
	if len(f) != 5 {
		return FileInfo{}, fmt.Errorf("unexpected stat output %q", out)
	}
	raw, err1 := strconv.ParseUint(f[0], 16, 32)
	size, err2 := strconv.ParseInt(f[1], 10, 64)
	mtime, err3 := strconv.ParseInt(f[2], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return FileInfo{}, fmt.Errorf("unexpected stat output %q: %w", out, err)
	}
	const typeMask, dir, link = 0o170000, 0o040000, 0o120000
	info := FileInfo{
		Exists:  true,
		IsDir:   raw&typeMask == dir,
		IsLink:  raw&typeMask == link,
		Mode:    FromUnixMode(uint32(raw)),
		Size:    size,
		ModTime: time.Unix(mtime, 0),
		Owner:   f[3],
		Group:   f[4],
	}
	if info.IsLink && len(lines) == 2 {
		info.LinkTarget = lines[1]
	}
	return info, nil
}

// FromUnixMode converts a chmod(2) value (file type bits ignored) to
// permission and special bits; UnixMode is its inverse.
func FromUnixMode(v uint32) fs.FileMode {
	m := fs.FileMode(v & 0o777)
	if v&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if v&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if v&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}
