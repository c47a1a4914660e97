package server

import "testing"

// TestServiceJobMemoryFlag: --job-memory sizes.
func TestServiceJobMemoryFlag(t *testing.T) {
	for in, want := range map[string]int64{"4GiB": 4 << 30, "512MiB": 512 << 20, "2G": 2 << 30, "1000": 1000, "0": 0, " 3 GB": 3 << 30} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1GiB", "4PiB", "1.5GiB", "99999999999TiB"} {
		if _, err := ParseBytes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
