package transport

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"strings"
)

// TreeSummer is a Transport that lists a directory's regular files with
// their sha256 its own way: on the control machine in Go, which needs no
// shell (the in-cluster controller's image holds only kubexm).
type TreeSummer interface {
	SumTree(ctx context.Context, dir string, become bool) (files map[string]string, exists bool, err error)
}

// SumTree lists the regular files below dir on t (symbolic links below it
// not followed) with their sha256, keyed by slash-separated path relative
// to dir; exists is false, with no error, when dir is absent. Its own way
// (TreeSummer), else one command on the host. The names are the host's:
// the caller checks them.
func SumTree(ctx context.Context, t Transport, dir string, become bool) (map[string]string, bool, error) {
	if s, ok := t.(TreeSummer); ok {
		return s.SumTree(ctx, dir, become)
	}
	return SumTreeCommand(ctx, t, dir, become)
}

// sumTreeScript prints "present" and "<sha256>  ./<path>" for every regular
// file below $1, "absent" when $1 does not exist.
const sumTreeScript = `[ -d "$1" ] || { [ -e "$1" ] && { echo "not a directory"; exit 2; }; echo absent; exit 0; }
cd "$1" || exit 2
echo present
find . -type f -exec sha256sum -- {} +`

// SumTreeCommand is SumTree in one command on t (/bin/sh, find and
// sha256sum on the host); become runs it through sudo like any command.
func SumTreeCommand(ctx context.Context, t Transport, dir string, become bool) (map[string]string, bool, error) {
	res, err := t.Run(ctx, Command{Argv: []string{"/bin/sh", "-c", sumTreeScript, "sh", dir}, Become: become})
	if err != nil {
		return nil, false, err
	}
	if res.ExitCode != 0 {
		return nil, false, fmt.Errorf("listing the files failed (exit %d): %s", res.ExitCode,
			strings.TrimSpace(string(res.Stdout)+" "+string(res.Stderr)))
	}
	if res.Truncated {
		return nil, false, fmt.Errorf("the listing of %s is larger than a reply may be", dir)
	}
	sc := bufio.NewScanner(bytes.NewReader(res.Stdout))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	if !sc.Scan() {
		return nil, false, fmt.Errorf("listing %s: no answer", dir)
	}
	switch sc.Text() {
	case "absent":
		return map[string]string{}, false, nil
	case "present":
	default:
		return nil, false, fmt.Errorf("listing %s: unexpected answer %q", dir, sc.Text())
	}
	files := map[string]string{}
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			return nil, false, fmt.Errorf("listing %s: unexpected line %q", dir, sc.Text())
		}
		files[strings.TrimPrefix(name, "./")] = sum
	}
	return files, true, sc.Err()
}

// DirMaker is a Transport that makes directories its own way: on the
// control machine in Go, which needs no mkdir(1).
type DirMaker interface {
	MkdirAll(ctx context.Context, dirs []string, mode fs.FileMode, become bool) error
}

// MkdirAll makes each of dirs with its parents, dirs created with mode, on
// t: its own way (DirMaker), else mkdir -p in one command.
func MkdirAll(ctx context.Context, t Transport, dirs []string, mode fs.FileMode, become bool) error {
	if m, ok := t.(DirMaker); ok {
		return m.MkdirAll(ctx, dirs, mode, become)
	}
	return MkdirAllCommand(ctx, t, dirs, mode, become)
}

// MkdirAllCommand is MkdirAll as mkdir -p -m MODE in one command on t.
func MkdirAllCommand(ctx context.Context, t Transport, dirs []string, mode fs.FileMode, become bool) error {
	argv := append([]string{"mkdir", "-p", "-m", fmt.Sprintf("%04o", mode.Perm()), "--"}, dirs...)
	res, err := t.Run(ctx, Command{Argv: argv, Become: become})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("mkdir failed (exit %d): %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}
