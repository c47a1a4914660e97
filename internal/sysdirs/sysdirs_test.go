package sysdirs

import (
	"path"
	"slices"
	"strings"
	"testing"
)

func TestDirsClosed(t *testing.T) {
	for _, d := range dirs {
		if d != path.Clean(d) || !strings.HasPrefix(d, "/") {
			t.Errorf("%q is not absolute and clean", d)
		}
		for p := path.Dir(d); p != "/"; p = path.Dir(p) {
			if !slices.Contains(dirs, p) {
				t.Errorf("%s is listed but its parent %s is not", d, p)
			}
		}
	}
	for _, ok := range []string{"/etc/kubernetes", "/var/lib/etcd", "/var/lib/containerd", "/usr/local/bin/kubelet", "/opt/cni", "/mnt/registry", "/etcd"} {
		if Contains(ok) {
			t.Errorf("%s should be removable", ok)
		}
	}
	for _, no := range []string{"/", "/etc", "/usr/local/bin", "/var/lib", "/usr/lib/systemd/system"} {
		if !Contains(no) {
			t.Errorf("%s should be refused", no)
		}
	}
}
