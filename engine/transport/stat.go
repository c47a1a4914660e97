package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
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

// statManyScript prints the canonical form (every symbolic link resolved)
// of its arguments, then the metadata of the second half of them with one
// find(1), all NUL-separated: three processes for any number of paths. find
// reports a path it cannot read on stderr and goes on with the others.
const statManyScript = `export LC_ALL=C
realpath -m -z -- "$@" || exit 1
shift $(($# / 2))
find "$@" -maxdepth 0 -printf '%y %m %s %T@ %u %g\0%l\0%p\0'`

// StatEntry is one path's metadata as StatMany reads it, and where the path
// really is: its directory with every symbolic link resolved, joined with
// its base name.
type StatEntry struct {
	Info FileInfo
	// Real is empty when it could not be found out (a transport that
	// cannot resolve a missing directory): treat it as overlapping any path.
	Real string
}

// RealJoin is StatEntry.Real for p given its directory's canonical form.
func RealJoin(realDir, p string) string {
	return path.Join(realDir, path.Base(path.Clean(p)))
}

// ManyStater is a Transport that reads many paths' metadata its own way,
// cheaper than one Stat after the other (concurrent SFTP requests, or no
// round trip at all on the control machine).
type ManyStater interface {
	StatMany(ctx context.Context, paths []string, become bool) ([]StatEntry, error)
}

// StatMany reads the metadata of every path, in the transport's cheapest
// way for many paths: its own (ManyStater), else one command. The paths
// must be absolute.
func StatMany(ctx context.Context, t Transport, paths []string, become bool) ([]StatEntry, error) {
	for _, p := range paths {
		if !path.IsAbs(p) {
			return nil, fmt.Errorf("%s: stat: %q is not an absolute path", t.Host(), p)
		}
	}
	if m, ok := t.(ManyStater); ok {
		return m.StatMany(ctx, paths, become)
	}
	return StatManyCommand(ctx, t, paths, become)
}

// StatManyCommand reads the metadata of every path in one command on t:
// one round trip instead of one per path, the way for hosts where each Stat
// would be a command itself (through sudo). become runs it through sudo
// like any command. Owner and group are names, or the id when it has none,
// as the other ways of reading metadata report them.
func StatManyCommand(ctx context.Context, t Transport, paths []string, become bool) ([]StatEntry, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	argv := make([]string, 0, 2*len(paths)+4)
	argv = append(argv, "/bin/sh", "-c", statManyScript, "sh")
	for _, p := range paths {
		argv = append(argv, path.Dir(path.Clean(p)))
	}
	argv = append(argv, paths...)
	res, err := t.Run(ctx, Command{Argv: argv, Become: become})
	if err != nil {
		return nil, err
	}
	recs := strings.Split(string(res.Stdout), "\x00")
	if len(recs) < 2*len(paths)+1 || (len(recs)-1-2*len(paths))%3 != 0 {
		return nil, fmt.Errorf("%s: stat of %d paths: unexpected output (rc %d): %s", t.Host(), len(paths), res.ExitCode, bytes.TrimSpace(res.Stderr))
	}
	// find names each path as given; the same path may be asked twice.
	found := map[string][]FileInfo{}
	for r := 2 * len(paths); r+3 <= len(recs); r += 3 {
		info, err := parseFind(recs[r], recs[r+1])
		if err != nil {
			return nil, fmt.Errorf("%s: stat %s: %w", t.Host(), recs[r+2], err)
		}
		found[recs[r+2]] = append(found[recs[r+2]], info)
	}
	out := make([]StatEntry, len(paths))
	missing := 0
	for i, p := range paths {
		out[i].Real = RealJoin(recs[i], p)
		if q := found[p]; len(q) > 0 {
			out[i].Info, found[p] = q[0], q[1:]
		} else {
			missing++
		}
	}
	// Only "no such file" may explain a path without an answer; anything
	// else (permission, a file where a directory should be) is an error.
	var problems []string
	for line := range strings.Lines(string(res.Stderr)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasSuffix(line, ": No such file or directory") {
			problems = append(problems, line)
		}
	}
	if len(problems) > 0 || (res.ExitCode != 0 && missing == 0) {
		return nil, fmt.Errorf("%s: stat of %d paths (rc %d): %s", t.Host(), len(paths), res.ExitCode, strings.Join(problems, "; "))
	}
	return out, nil
}

// parseFind reads one record of statManyScript's find.
func parseFind(meta, link string) (FileInfo, error) {
	f := strings.Fields(meta)
	if len(f) != 6 {
		return FileInfo{}, fmt.Errorf("unexpected find output %q", meta)
	}
	perm, err1 := strconv.ParseUint(f[1], 8, 32)
	size, err2 := strconv.ParseInt(f[2], 10, 64)
	sec, frac, _ := strings.Cut(f[3], ".")
	secs, err3 := strconv.ParseInt(sec, 10, 64)
	var nsec int64
	if frac != "" {
		frac = (frac + "000000000")[:9]
		nsec, _ = strconv.ParseInt(frac, 10, 64)
	}
	if err := errors.Join(err1, err2, err3); err != nil {
		return FileInfo{}, fmt.Errorf("unexpected find output %q: %w", meta, err)
	}
	info := FileInfo{
		Exists:  true,
		IsDir:   f[0] == "d",
		IsLink:  f[0] == "l",
		Mode:    FromUnixMode(uint32(perm)),
		Size:    size,
		ModTime: time.Unix(secs, nsec),
		Owner:   f[4],
		Group:   f[5],
	}
	if info.IsLink {
		info.LinkTarget = link
	}
	return info, nil
}

// FileSum is what ManySummer reads of one path: its sha256 when it is a
// regular file (empty when it is missing or something else), and then its
// permission bits as `stat -c %a` prints them (with setuid, setgid and
// sticky) and its owner and group, each by name and by id.
type FileSum struct {
	Sum                    string
	Mode                   uint32
	Owner, Group, UID, GID string
}

// ManySummer is a Transport that reads many files' sha256 and attributes in
// one round trip, so that a loop sending files that are already in place
// costs one command per host instead of one per file.
type ManySummer interface {
	SumMany(ctx context.Context, paths []string, become bool) ([]FileSum, error)
}

// SumRenamer is a Transport that keeps records of its hosts' file sums
// (so that a later read of an unchanged file does not hash it): a file
// kubexm wrote beside dst and whose sha256 it knows is moved into place
// with its sum recorded, and the next run does not read it again.
type SumRenamer interface {
	// RenameSum moves tmp over dst on the host and records sum (the
	// content's sha256) as dst's where the transport keeps records.
	RenameSum(ctx context.Context, tmp, dst, sum string, become bool) error
}
