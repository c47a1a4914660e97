package textdiff

import "testing"

func TestUnifiedDiff(t *testing.T) {
	cases := []struct {
		name, old, new string
		exists         bool
		want           string
	}{
		{"equal", "a\nb\n", "a\nb\n", true, ""},
		{"new file", "", "x\ny\n", false, "--- /dev/null\n+++ b/etc/f\n@@ -0,0 +1,2 @@\n+x\n+y\n"},
		{"change middle", "1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\nFIVE\n6\n7\n8\n9\n", true,
			"--- a/etc/f\n+++ b/etc/f\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+FIVE\n 6\n 7\n 8\n"},
		{"two hunks", "a\n1\n2\n3\n4\n5\n6\n7\n8\nb\n", "A\n1\n2\n3\n4\n5\n6\n7\n8\nB\n", true,
			"--- a/etc/f\n+++ b/etc/f\n@@ -1,4 +1,4 @@\n-a\n+A\n 1\n 2\n 3\n@@ -7,4 +7,4 @@\n 6\n 7\n 8\n-b\n+B\n"},
		{"no newline", "a", "b", true, "--- a/etc/f\n+++ b/etc/f\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n\\ No newline at end of file\n"},
		{"binary", "a\x00", "b", true, "Binary files /etc/f differ\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Unified("/etc/f", []byte(c.old), []byte(c.new), c.exists)
			if got != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}
