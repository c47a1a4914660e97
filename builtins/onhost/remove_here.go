package onhost

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/mensylisir/kubexm/engine/step"
)

// inProcess is a transport whose file operations kubexm does in its own
// process for become (the control machine, without sudo).
type inProcess interface {
	InProcess(become bool) bool
}

// removesHere says whether state: absent runs in kubexm's own process
// rather than as ResolveScript and RemoveScript: on the control machine,
// where the in-cluster controller's image has no shell.
func removesHere(env *step.Env) bool {
	t, ok := env.Target.(inProcess)
	return ok && t.InProcess(env.Become)
}

// resolveHere is ResolveScript in Go.
func resolveHere(p string) (resolved string, emptyMount bool, err error) {
	dir, err := filepath.EvalSymlinks(filepath.Dir(p))
	if err != nil {
		return "", false, err
	}
	resolved = filepath.Join(dir, filepath.Base(p))
	fi, err := os.Lstat(resolved)
	if err != nil || !fi.IsDir() {
		return resolved, false, nil
	}
	ents, err := os.ReadDir(resolved)
	if err != nil || len(ents) > 0 {
		return resolved, false, nil
	}
	mounts, err := mountPoints()
	if err != nil {
		return "", false, err
	}
	return resolved, slices.Contains(mounts, resolved), nil
}

// removeHere is RemoveScript in Go: with unmount, what is mounted below p is
// unmounted first, deepest first; a mount point is emptied; a tree with
// another file system mounted below it is refused before anything is
// removed (rm --one-file-system would stop there half-way).
func removeHere(p string, unmount bool) (emptied bool, err error) {
	mounts, err := mountPoints()
	if err != nil {
		return false, err
	}
	var below []string
	for _, m := range mounts {
		if strings.HasPrefix(m, p+"/") {
			below = append(below, m)
		}
	}
	slices.Sort(below)
	slices.Reverse(below)
	if len(below) > 0 {
		if !unmount {
			return false, fmt.Errorf("%s has a file system mounted below it (%s): not removed (unmount it first, or unmount: true)", p, below[len(below)-1])
		}
		for _, m := range below {
			if err := syscall.Unmount(m, 0); err != nil && !errors.Is(err, syscall.EINVAL) {
				return false, fmt.Errorf("umount %s: %w", m, err)
			}
		}
	}
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if fi.Mode()&fs.ModeSymlink == 0 && slices.Contains(mounts, p) {
		ents, err := os.ReadDir(p)
		if err != nil {
			return false, err
		}
		for _, e := range ents {
			if err := os.RemoveAll(filepath.Join(p, e.Name())); err != nil {
				return false, err
			}
		}
		return true, nil
	}
	return false, os.RemoveAll(p)
}

// mountPoints lists this process's mount points, as /proc/self/mounts
// writes them (octal escapes undone).
func mountPoints() ([]string, error) {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 {
			out = append(out, unescapeMount(fields[1]))
		}
	}
	return out, sc.Err()
}

// unescapeMount undoes the kernel's \ooo escapes of space, tab, newline and
// backslash in a mount point.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
