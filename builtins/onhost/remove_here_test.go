package onhost

import "testing"

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/var/lib/kubelet`:         "/var/lib/kubelet",
		`/mnt/with\040space`:       "/mnt/with space",
		`/mnt/tab\011and\134slash`: "/mnt/tab\tand\\slash",
		`/mnt/trailing\04`:         `/mnt/trailing\04`,
		`/mnt/not\999octal`:        `/mnt/not\999octal`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}
