package hostrange

import (
	"slices"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	cases := []struct {
		in   string
		want []string
		err  string
	}{
		{"node1", []string{"node1"}, ""},
		{"node[5:6]", []string{"node5", "node6"}, ""},
		{"node[08:10]", []string{"node08", "node09", "node10"}, ""},
		{"rack[1:2]-a", []string{"rack1-a", "rack2-a"}, ""},
		{"[1:2]", []string{"1", "2"}, ""},
		{"node[3:3]", []string{"node3"}, ""},
		{"node[6:5]", nil, "greater than end"},
		{"node[5]", nil, "start:end"},
		{"node[a:b]", nil, "not a number"},
		{"node[:3]", nil, "not a number"},
		{"node[1:3", nil, "unbalanced"},
		{"node1:3]", nil, "unbalanced"},
		{"n[1:2][3:4]", nil, "only one range"},
		{"n[-1:2]", nil, "not a number"},
		{"n[0:99999999999999999999999]", nil, "too large"},
		{"n[0:100000]", nil, "larger than the limit"},
	}
	for _, tc := range cases {
		got, err := Expand(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"node1", "node[5:6]", "node[08:10]", "a[1:2]b", "[", "]", "n[9:1]", "n[0:0]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		names, err := Expand(s)
		if err != nil {
			return
		}
		if len(names) == 0 || len(names) > MaxRangeHosts {
			t.Fatalf("%q expanded to %d names", s, len(names))
		}
	})
}
