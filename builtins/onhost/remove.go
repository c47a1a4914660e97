package onhost

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/internal/sysdirs"
)

// CheckRemovable refuses, before anything runs, a path that state: absent
// must not remove as written.
func CheckRemovable(p string) error {
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("refusing to remove %q: not an absolute path", p)
	}
	if slices.Contains(strings.Split(p, "/"), "..") {
		return fmt.Errorf("refusing to remove %q: the path contains ..", p)
	}
	if c := path.Clean(p); sysdirs.Contains(c) {
		return fmt.Errorf("refusing to remove %s: it is a system directory or holds one", c)
	}
	return nil
}

// ResolveScript prints the path with its parent directory's symbolic links
// resolved, which is what rm removes: /data/etc with /data -> / is /etc;
// then, on a second line, "empty-mount" for an empty mount point, which
// state absent leaves as it is.
const ResolveScript = `d=$(cd -P -- "$(dirname -- "$1")" && pwd) || exit 1
p="${d%/}/$(basename -- "$1")"
printf '%s\n' "$p"
if [ ! -L "$p" ] && [ -d "$p" ] && [ -z "$(ls -A -- "$p")" ] &&
  awk '{ print $2 }' /proc/self/mounts | while read -r m; do printf '%b\n' "$m"; done | grep -qxF -- "$p"; then
  echo empty-mount
fi`

// RemoveScript removes $1 without crossing into other file systems. With $2
// = 1, what is mounted below $1 is unmounted first, deepest first. A mount
// point is emptied (a mounted disk cannot be removed); "emptied" or
// "removed" is printed.
const RemoveScript = `set -e
p=$1
mounts() { awk '{ print $2 }' /proc/self/mounts | while read -r m; do printf '%b\n' "$m"; done; }
if [ "$2" = 1 ]; then
  mounts | while read -r m; do case $m in "$p"/*) printf '%s\n' "$m" ;; esac; done | sort -r |
    while read -r m; do umount -- "$m"; done
fi
if [ ! -L "$p" ] && mounts | grep -qxF -- "$p"; then
  find "$p" -mindepth 1 -maxdepth 1 -exec rm -rf --one-file-system -- {} +
  echo emptied
else
  rm -rf --one-file-system -- "$p"
  echo removed
fi`

// RemovePath is state: absent for an existing path: the path as the host
// resolves it is checked again (a symlink in a parent can lead anywhere),
// then removed; in kubexm's own process on the control machine
// (removesHere), through the scripts elsewhere.
func RemovePath(ctx context.Context, env *step.Env, p string, isLink, unmount bool, data map[string]any) (step.Result, error) {
	here := removesHere(env)
	var resolved, state string
	if here {
		r, emptyMount, err := resolveHere(p)
		if err != nil {
			return step.Result{}, fmt.Errorf("%s: file: resolving %s: %w", env.Target.Host(), p, err)
		}
		resolved = r
		if emptyMount {
			state = "empty-mount"
		}
	} else {
		res, err := RunScript(ctx, env, ResolveScript, p)
		if err != nil {
			return step.Result{}, err
		}
		if res.ExitCode != 0 {
			return step.Result{}, CmdError(env, []string{"resolve", p}, res)
		}
		resolved, state, _ = strings.Cut(strings.TrimSuffix(string(res.Stdout), "\n"), "\n")
	}
	if err := CheckRemovable(resolved); err != nil {
		return step.Result{}, fmt.Errorf("%s: file: %s is %s there: %w", env.Target.Host(), p, resolved, err)
	}
	if state == "empty-mount" {
		// An emptied mount point: what a first delete left.
		return step.Result{Data: data}, nil
	}
	changes := []string{"remove " + p}
	if env.Check {
		return Done(env, changes, data, ""), nil
	}
	var emptied bool
	if here {
		var err error
		if emptied, err = removeHere(resolved, unmount && !isLink); err != nil {
			return step.Result{}, fmt.Errorf("%s: file: removing %s: %w", env.Target.Host(), p, err)
		}
	} else {
		flag := "0"
		if unmount && !isLink {
			flag = "1"
		}
		res, err := RunScript(ctx, env, RemoveScript, resolved, flag)
		if err != nil {
			return step.Result{}, err
		}
		if res.ExitCode != 0 {
			return step.Result{}, CmdError(env, []string{"rm", "-rf", "--one-file-system", "--", resolved}, res)
		}
		emptied = strings.TrimSpace(string(res.Stdout)) == "emptied"
	}
	if emptied {
		changes = []string{"empty the mount point " + p}
	}
	return Done(env, changes, data, ""), nil
}
