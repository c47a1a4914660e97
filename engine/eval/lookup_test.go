package eval

import (
	"strings"
	"testing"
)

func TestFormatPath(t *testing.T) {
	for want, keys := range map[string][]any{
		"a.b":                 {"a", "b"},
		"groups.etcd[2]":      {"groups", "etcd", 2},
		`hostvars["n1.x"].ip`: {"hostvars", "n1.x", "ip"},
		"kube-proxy.mode":     {"kube-proxy", "mode"},
		`m[""]`:               {"m", ""},
	} {
		if got := formatPath("", keys); got != want {
			t.Errorf("formatPath(%v) = %q, want %q", keys, got, want)
		}
	}
	if got := formatPath("$x", []any{"a"}); got != "$x.a" {
		t.Errorf("formatPath with label = %q", got)
	}
}

func TestLookupTypedValues(t *testing.T) {
	type fact struct {
		Name    string
		private int
	}
	base := map[string]any{
		"f":    fact{Name: "n", private: 1},
		"p":    &fact{Name: "p"},
		"ints": []int{1, 2},
		"m":    map[string]int{"a": 1},
		"np":   (*fact)(nil),
	}
	for _, tt := range []struct {
		keys []any
		want any
		err  string
	}{
		{[]any{"f", "Name"}, "n", ""},
		{[]any{"p", "Name"}, "p", ""},
		{[]any{"ints", 1}, 2, ""},
		{[]any{"ints", uint64(0)}, 1, ""},
		{[]any{"m", "a"}, 1, ""},
		{[]any{"f", "private"}, nil, "undefined"},
		{[]any{"m", "b"}, nil, "undefined"},
		{[]any{"np", "Name"}, nil, "undefined"},
		{[]any{"ints", "x"}, nil, "cannot index a list"},
		{[]any{"m", 1}, nil, "cannot index a map"},
		{[]any{"f", 1}, nil, "cannot index"},
	} {
		got, err := lookup("", base, tt.keys, false)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("lookup(%v) = %v, %v; want error %q", tt.keys, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("lookup(%v) = %v, %v; want %v", tt.keys, got, err, tt.want)
		}
	}
	if v, err := lookup("", base, []any{"m", "b", "c"}, true); v != nil || err != nil {
		t.Errorf("lenient lookup of a missing key = %v, %v", v, err)
	}
}

func TestCacheBound(t *testing.T) {
	c := newCache[int](3)
	for i, k := range []string{"a", "b", "c", "d", "e"} {
		c.put(k, i)
	}
	if n := cacheLen(c); n != 3 {
		t.Fatalf("cache holds %d entries, want 3", n)
	}
	if v, ok := c.get("e"); !ok || v != 4 {
		t.Fatalf("latest entry missing: %v %v", v, ok)
	}
	c.put("e", 5)
	if n := cacheLen(c); n != 3 {
		t.Fatalf("replacing an entry changed the size to %d", n)
	}
}

func cacheLen[V any](c *cache[V]) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.items)
}
