package server

import (
	"strings"
	"testing"
	"time"
)

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

func TestTokenExpiry(t *testing.T) {
	if exp, err := TokenExpiry("operator", 0); err != nil || !exp.IsZero() {
		t.Errorf("no ttl: %v %v", exp, err)
	}
	if exp, err := TokenExpiry("read-only", time.Hour); err != nil || time.Until(exp) < 59*time.Minute {
		t.Errorf("1h: %v %v", exp, err)
	}
	if _, err := TokenExpiry("admin", 0); err == nil || !strings.Contains(err.Error(), "--role must be") {
		t.Errorf("bad role: %v", err)
	}
	if _, err := TokenExpiry("operator", -time.Hour); err == nil || !strings.Contains(err.Error(), "--ttl -1h0m0s") {
		t.Errorf("negative ttl: %v", err)
	}
}

// A job's child gets the root flags given and --confine-dial with the
// service's --allow-host-networks, none or some.
func TestChildArgs(t *testing.T) {
	for _, c := range []struct {
		allow []string
		want  string
	}{
		{nil, "--confine-dial="},
		{[]string{"127.0.0.0/8", "10.1.0.0/16"}, "--confine-dial=127.0.0.0/8,10.1.0.0/16"},
	} {
		s := &Service{cfg: Config{AllowNets: c.allow}}
		given := []string{"--upload-forks=3"}
		got := s.childArgs(given)
		if len(got) != 2 || got[0] != "--upload-forks=3" || got[1] != c.want || len(given) != 1 {
			t.Errorf("--allow-host-networks %v: the child's arguments %v, want --upload-forks=3 %s", c.allow, got, c.want)
		}
	}
}
