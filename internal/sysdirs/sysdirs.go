// Package sysdirs knows the operating system's own directories, which no
// delete may remove: the file builtin refuses them on the host, and cluster
// file validation refuses them for every path a role removes.
package sysdirs

import (
	"slices"
	"strings"
)

// systemDirs are directories of the operating system that no delete may
// remove, whatever a playbook or a cluster file says: the top-level
// directories of the Filesystem Hierarchy Standard and the well-known
// directories below them that hold other software's files. Removing one of
// them (or, since rm -r removes everything below, a parent of one) breaks
// the host. Every parent of an entry is an entry too (TestDirsClosed).
var dirs = []string{
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

// Contains reports whether an absolute, clean path is a system directory or
// a parent of one.
func Contains(p string) bool {
	if slices.Contains(dirs, p) {
		return true
	}
	for _, d := range dirs {
		if strings.HasPrefix(d, p+"/") {
			return true
		}
	}
	return false
}

// List returns the system directories, in a fixed order.
func List() []string { return slices.Clone(dirs) }
