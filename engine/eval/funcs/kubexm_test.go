package funcs

import (
	"os/exec"
	"strings"
	"testing"
)

func TestCIDRHost(t *testing.T) {
	tests := []struct {
		cidr string
		n    any
		want string
		err  string
	}{
		{"10.96.0.0/12", 1, "10.96.0.1", ""},
		{"10.96.0.0/12", 10, "10.96.0.10", ""},
		{"10.96.0.0/12", 256, "10.96.1.0", ""},
		{"10.96.0.0/12", -1, "10.111.255.255", ""},
		{"10.96.0.0/12", uint64(2), "10.96.0.2", ""},
		{"10.96.0.0/12", int64(3), "10.96.0.3", ""},
		{"10.96.0.0/12", 4.0, "10.96.0.4", ""},
		{"10.96.0.0/12", "5", "10.96.0.5", ""},
		{"10.96.5.7/12", 1, "10.96.0.1", ""}, // host bits are ignored
		{"192.168.1.0/24", 255, "192.168.1.255", ""},
		{"192.168.1.0/24", 256, "", "out of range"},
		{"192.168.1.0/24", -257, "", "out of range"},
		{"192.168.1.0/32", 0, "192.168.1.0", ""},
		{"fd00:10:96::/108", 1, "fd00:10:96::1", ""},
		{"fd00:10:96::/108", 10, "fd00:10:96::a", ""},
		{"fd00::/64", -1, "fd00::ffff:ffff:ffff:ffff", ""},
		{"::/0", "340282366920938463463374607431768211455", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ""},
		{"10.0.0.0/8", 1.5, "", "whole number"},
		{"10.0.0.0/8", "x", "", "not a number"},
		{"10.0.0.0/8", nil, "", "not a number"},
		{"10.0.0.0", 1, "", "cidrHost"},
		{"10.0.0.0/33", 1, "", "cidrHost"},
	}
	for _, tt := range tests {
		got, err := cidrHost(tt.cidr, tt.n)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("cidrHost(%q, %v) = %q, %v; want error containing %q", tt.cidr, tt.n, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("cidrHost(%q, %v) = %q, %v; want %q", tt.cidr, tt.n, got, err, tt.want)
		}
	}
}

func TestCIDRContains(t *testing.T) {
	tests := []struct {
		cidr, x string
		want    bool
		err     bool
	}{
		{"10.96.0.0/12", "10.96.0.1", true, false},
		{"10.96.0.0/12", "10.112.0.1", false, false},
		{"10.96.0.0/12", "10.100.0.0/16", true, false},
		{"10.96.0.0/12", "10.0.0.0/8", false, false},
		{"10.0.0.0/8", "::ffff:10.1.2.3", true, false},
		{"fd00::/8", "fd12::1", true, false},
		{"fd00::/8", "10.0.0.1", false, false},
		{"bad", "10.0.0.1", false, true},
		{"10.0.0.0/8", "bad", false, true},
		{"10.0.0.0/8", "bad/8", false, true},
	}
	for _, tt := range tests {
		got, err := cidrContains(tt.cidr, tt.x)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("cidrContains(%q, %q) = %v, %v", tt.cidr, tt.x, got, err)
		}
	}
}

func TestIPFamily(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.1": "IPv4", "10.0.0.0/8": "IPv4", "fd00::1": "IPv6", "fd00::/64": "IPv6",
		"::ffff:1.2.3.4": "IPv4", " 192.168.0.1 ": "IPv4",
	} {
		if got, err := ipFamily(in); err != nil || got != want {
			t.Errorf("ipFamily(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "node1", "10.0.0.1/99"} {
		if _, err := ipFamily(bad); err == nil {
			t.Errorf("ipFamily(%q): no error", bad)
		}
	}
}

func TestJoinHostPort(t *testing.T) {
	for _, tt := range []struct {
		host string
		port any
		want string
	}{
		{"10.0.0.1", 6443, "10.0.0.1:6443"},
		{"fd00::1", "6443", "[fd00::1]:6443"},
		{"lb.local", uint64(443), "lb.local:443"},
	} {
		if got, err := joinHostPort(tt.host, tt.port); err != nil || got != tt.want {
			t.Errorf("joinHostPort(%q, %v) = %q, %v", tt.host, tt.port, got, err)
		}
	}
	if _, err := joinHostPort("h", []any{}); err == nil {
		t.Error("joinHostPort with a list port: no error")
	}
}

func TestVersions(t *testing.T) {
	for _, tt := range []struct {
		v, min string
		want   bool
	}{
		{"v1.30.2", "1.29", true},
		{"1.29.0", "v1.29", true},
		{"v1.28.9", "1.29", false},
		{"v1.30.0-rc.1", "1.30.0", false},
	} {
		if got, err := versionAtLeast(tt.v, tt.min); err != nil || got != tt.want {
			t.Errorf("versionAtLeast(%q, %q) = %v, %v", tt.v, tt.min, got, err)
		}
	}
	if _, err := versionAtLeast("latest", "1.29"); err == nil {
		t.Error("versionAtLeast(latest): no error")
	}
	if ok, err := semverCompare(">=1.28 <1.31", "v1.30.2"); err != nil || !ok {
		t.Errorf("semverCompare = %v, %v", ok, err)
	}
	if _, err := semverCompare(">>1", "1.0.0"); err == nil {
		t.Error("semverCompare with a bad constraint: no error")
	}
}

func TestYAML(t *testing.T) {
	out, err := toYAML(map[string]any{"b": 1, "a": []any{"x", "z"}})
	if err != nil || out != "a:\n- x\n- z\nb: 1" {
		t.Fatalf("toYAML = %q, %v", out, err)
	}
	v, err := fromYAML("a:\n  b: c\n")
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := v.(map[string]any); !ok || m["a"].(map[string]any)["b"] != "c" {
		t.Fatalf("fromYAML = %#v", v)
	}
	if _, err := fromYAML("a: [1"); err == nil {
		t.Fatal("fromYAML of broken YAML: no error")
	}
}

func TestShquote(t *testing.T) {
	tests := []struct {
		in   []any
		want string
	}{
		{[]any{"plain-word_1.2/x"}, "plain-word_1.2/x"},
		{[]any{""}, "''"},
		{[]any{nil}, "''"},
		{[]any{"/x'; touch PWNED; echo '"}, `'/x'\''; touch PWNED; echo '\'''`},
		{[]any{"curl$(touch PWNED)"}, `'curl$(touch PWNED)'`},
		{[]any{"a`b`"}, "'a`b`'"},
		{[]any{6443}, "6443"},
		{[]any{[]any{"a b", "c"}}, "'a b' c"},
		{[]any{[]any{}}, ""},
		{[]any{"a", "b c"}, "a 'b c'"},
		{[]any{"LD_PRELOAD=/x.so"}, "'LD_PRELOAD=/x.so'"},
	}
	for _, tt := range tests {
		got, err := shquote(tt.in...)
		if err != nil || got != tt.want {
			t.Errorf("shquote(%q) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []any{map[string]any{"a": 1}, "a\x00b"} {
		if _, err := shquote(bad); err == nil {
			t.Errorf("shquote(%q) gave no error", bad)
		}
	}
}

// TestShquoteRoundTrip runs what shquote makes through /bin/sh: every value,
// however hostile, comes back as exactly one unchanged argument.
func TestShquoteRoundTrip(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for _, v := range []string{"/x'; touch PWNED; echo '", "curl$(touch PWNED)", "a\nb", `"$HOME"`, "`id`", "*", "~", "-n", "'", "''", `\`, "a b\tc", "X=1", "it's=1"} {
		q, err := shquote(v)
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(sh, "-c", `set -- `+q+`; printf '%s\0' "$@"; printf '%s' "$#"`, "sh").Output()
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if want := v + "\x001"; string(out) != want {
			t.Errorf("sh saw %q for %q (quoted %s)", out, v, q)
		}
	}
}
