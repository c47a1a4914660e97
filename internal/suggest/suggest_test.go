package suggest

import (
	"strings"
	"testing"
)

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "", 3}, {"", "abc", 3}, {"port", "port", 0},
		{"prot", "port", 1}, {"kitten", "sitting", 3}, {"whn", "when", 1}, {"ca", "abc", 3},
		{"dataDirr", "dataDir", 1}, {"ключ", "клюк", 1},
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestClosest(t *testing.T) {
	for _, tc := range []struct {
		got        string
		candidates []string
		want       string
	}{
		{"taks", []string{"tags", "tasks"}, "tasks"},
		{"InternalAddress", []string{"address", "internalAddress"}, "internalAddress"},
		{"prot", []string{"port", "user"}, "port"},
		{"zzzzzz", []string{"port", "user"}, ""},
		{"x", nil, ""},
	} {
		if got := Closest(tc.got, tc.candidates); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.got, got, tc.want)
		}
	}
}

func TestCommand(t *testing.T) {
	names := []string{"nodes", "node", "clusters", "cluster", "runs", "kubeconfig"}
	same := func(a, b string) bool { return strings.TrimSuffix(a, "s") == strings.TrimSuffix(b, "s") }
	for got, want := range map[string]string{
		"nodse": "nodes", "pods": "", "clu": "cluster", "kube": "kubeconfig", "r": "runs", "": "",
	} {
		if s := Command(got, names, same); s != want && !(want != "" && same(s, want)) {
			t.Errorf("Command(%q) = %q, want %q", got, s, want)
		}
	}
	// The start of two commands is none of them.
	if s := Command("c", []string{"cordon", "create"}, func(a, b string) bool { return a == b }); s != "" {
		t.Errorf(`Command("c") = %q, want ""`, s)
	}
}
