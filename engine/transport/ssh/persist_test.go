package ssh

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/inventory"
)

func TestNewPersistRefuses(t *testing.T) {
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir  string
		idle time.Duration
		want string
	}{
		{filepath.Join(t.TempDir(), "ssh"), 0, "not a duration"},
		{filepath.Join(t.TempDir(), "ssh"), -time.Second, "not a duration"},
		{open, time.Minute, "mode 0700"},
		{filepath.Join(t.TempDir(), strings.Repeat("d", 80)), time.Minute, "shorter directory"},
	} {
		if _, err := NewPersist(tc.dir, tc.idle); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewPersist(%s, %s): %v, want %q", tc.dir, tc.idle, err, tc.want)
		}
	}
	p, err := NewPersist(filepath.Join(t.TempDir(), "ssh"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p.Dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("%s: %v %v", p.Dir, fi, err)
	}
}

// A kept connection's socket names the login, never its secret, and a run
// hands each login over once, without its become password or variables.
func TestPersistHandsEachLoginOnce(t *testing.T) {
	p, err := NewPersist(filepath.Join(t.TempDir(), "ssh"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	kh, err := NewKnownHosts(Off, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	tr := func(user, password string) *Transport {
		h := inventory.Host{Name: "n1", Address: "10.0.0.1", Port: 22, User: user, Password: password,
			BecomePassword: "sudo-secret", Vars: map[string]any{"x": 1}}
		return &Transport{name: h.Name, addr: "10.0.0.1:22", host: h, user: user, kh: kh}
	}
	a, b, other := tr("root", "one"), tr("root", "two"), tr("admin", "one")
	if p.socket(a) != p.socket(b) {
		t.Error("the password changed the socket's name")
	}
	if p.socket(a) == p.socket(other) {
		t.Error("two users share a socket")
	}
	if name := filepath.Base(p.socket(a)); len(name) != socketNameLen || filepath.Dir(p.socket(a)) != p.Dir {
		t.Errorf("socket %s", p.socket(a))
	}
	p.handedTo(a)
	p.handedTo(b)
	p.handedTo(other)
	raw, err := p.HandOver()
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"sudo-secret", `"x"`} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the keeper's configuration holds %s: %s", secret, raw)
		}
	}
	var cfg keeperConfig
	if err := json.Unmarshal(raw, &cfg); err != nil || len(cfg.Hosts) != 2 || cfg.Idle != time.Minute || cfg.Policy != Off {
		t.Fatalf("%s: %v", raw, err)
	}
	if again, _ := p.HandOver(); again != nil {
		t.Errorf("handed again: %s", again)
	}
}

// A keeper that cannot keep a host says so, when it happens, without the
// host's secrets, and ends with an error.
func TestKeeperLogsWhatItCannotKeep(t *testing.T) {
	dir := t.TempDir()
	cfg, err := json.Marshal(keeperConfig{Idle: time.Minute, Policy: Off, Hosts: []keptHost{{
		Socket: filepath.Join(dir, "a.sock"),
		Host:   inventory.Host{Name: "gone", Address: "127.0.0.1", Port: 1, User: "root", Password: "login-secret"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	err = ServeKeeper(t.Context(), strings.NewReader(string(cfg)), &log)
	if err == nil || !strings.Contains(err.Error(), "1 of 1 connections not kept") {
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(log.String(), "host gone not kept") || strings.Contains(log.String(), "login-secret") {
		t.Fatalf("log: %s", log.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "a.sock")); !os.IsNotExist(err) {
		t.Fatalf("a socket for a host not kept: %v", err)
	}
	if err := ServeKeeper(t.Context(), strings.NewReader("{"), &log); err == nil {
		t.Fatal("a configuration cut short was taken")
	}
}
