package datadir

import "testing"

// A name from an API request becomes a path only when it cannot leave the
// cluster's directory.
func TestPathsStayInTheClusterDirectory(t *testing.T) {
	sum := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	if got, want := BundlePath("/d", "c1", sum), "/d/clusters/c1/bundles/"+sum+".tar.gz"; got != want {
		t.Errorf("BundlePath = %q, want %q", got, want)
	}
	if got, want := BackupPath("/d", "c1", "b-1.tar.gz"), "/d/clusters/c1/backups/b-1.tar.gz"; got != want {
		t.Errorf("BackupPath = %q, want %q", got, want)
	}
	for _, s := range []string{"", "../x", "/etc/passwd", sum[:63], "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef"} {
		if p := BundlePath("/d", "c1", s); p != "" {
			t.Errorf("BundlePath(%q) = %q, want refused", s, p)
		}
	}
	for _, s := range []string{"", "../b.tar.gz", "a/b.tar.gz", ".hidden.tar.gz", "b.tar", "b.tar.gz/.."} {
		if p := BackupPath("/d", "c1", s); p != "" {
			t.Errorf("BackupPath(%q) = %q, want refused", s, p)
		}
	}
}
