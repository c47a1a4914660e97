package builtins

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/mensylisir/kubexm/engine/step"
)

// systemDirs are directories of the operating system that no delete may
// remove, whatever a playbook or a cluster file says: the top-level
// directories of the Filesystem Hierarchy Standard and the well-known
// directories below them that hold other software's files. Removing one of
// them (or, since rm -r removes everything below, a parent of one) breaks
// the host. Every parent of an entry is an entry too (TestSystemDirsClosed).
var systemDirs = []string{
	"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32",
	"/lost+found", "/media", "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/srv",
	"/sys", "/tmp", "/usr", "/var",
	"/etc/default", "/etc/systemd", "/etc/systemd/system", "/etc/ssh", "/etc/ssl", "/etc/pki",
	"/etc/sysctl.d", "/etc/modules-load.d", "/etc/security", "/etc/sudoers.d", "/etc/apt", "/etc/yum.repos.d",
	"/lib/modules", "/lib/systemd", "/lib/systemd/system",
	"/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libexec", "/usr/include",
	"/usr/share", "/usr/src", "/usr/local", "/usr/lib/systemd", "/usr/lib/systemd/system", "/usr/lib/modules",
	"/usr/local/bin", "/usr/local/sbin", "/usr/local/lib", "/usr/local/share", "/usr/local/etc",
	"/usr/local/include", "/usr/local/src",
	"/var/lib", "/var/log", "/var/cache", "/var/spool", "/var/tmp", "/var/run", "/var/lock",
	"/var/mail", "/var/opt", "/var/backups", "/var/local",
	"/run/systemd",
}

// isSystemDir reports whether an absolute, clean path is a system directory
// or a parent of one.
func isSystemDir(p string) bool {
	if slices.Contains(systemDirs, p) {
		return true
	}
	for _, d := range systemDirs {
		if strings.HasPrefix(d, p+"/") {
			return true
		}
	}
	return false
}

// checkRemovable refuses, before anything runs, a path that state: absent
// must not remove as written.
func checkRemovable(p string) error {
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("refusing to remove %q: not an absolute path", p)
	}
	if slices.Contains(strings.Split(p, "/"), "..") {
		return fmt.Errorf("refusing to remove %q: the path contains ..", p)
	}
	if c := path.Clean(p); isSystemDir(c) {
		return fmt.Errorf("refusing to remove %s: it is a system directory or holds one", c)
	}
	return nil
}

// resolveScript prints the path with its parent directory's symbolic links
// resolved, which is what rm removes: /data/etc with /data -> / is /etc.
const resolveScript = `d=$(cd -P -- "$(dirname -- "$1")" && pwd) || exit 1
printf '%s/%s' "${d%/}" "$(basename -- "$1")"`

// removeScript removes $1 without crossing into other file systems. With $2
// = 1, what is mounted below $1 is unmounted first, deepest first. A mount
// point is emptied (a mounted disk cannot be removed); "emptied" or
// "removed" is printed.
const removeScript = `set -e
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

// removePath is state: absent for an existing path: the path as the host
// resolves it is checked again (a symlink in a parent can lead anywhere),
// then removed.
func removePath(ctx context.Context, env *step.Env, p string, isLink, unmount bool, data map[string]any) (step.Result, error) {
	res, err := runScript(ctx, env, resolveScript, p)
	if err != nil {
		return step.Result{}, err
	}
	if res.ExitCode != 0 {
		return step.Result{}, cmdError(env, []string{"resolve", p}, res)
	}
	resolved := string(res.Stdout)
	if err := checkRemovable(resolved); err != nil {
		return step.Result{}, fmt.Errorf("%s: file: %s is %s there: %w", env.Target.Host(), p, resolved, err)
	}
	changes := []string{"remove " + p}
	if env.Check {
		return done(env, changes, data, ""), nil
	}
	flag := "0"
	if unmount && !isLink {
		flag = "1"
	}
	res, err = runScript(ctx, env, removeScript, resolved, flag)
	if err != nil {
		return step.Result{}, err
	}
	if res.ExitCode != 0 {
		return step.Result{}, cmdError(env, []string{"rm", "-rf", "--one-file-system", "--", resolved}, res)
	}
	if strings.TrimSpace(string(res.Stdout)) == "emptied" {
		changes = []string{"empty the mount point " + p}
	}
	return done(env, changes, data, ""), nil
}
