package secretbox

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestSealOpen(t *testing.T) {
	t.Setenv(KeyEnv, "")
	file := filepath.Join(t.TempDir(), "key")
	k, err := LoadKey(file, true)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	if k2, err := LoadKey(file, false); err != nil || !bytes.Equal(k, k2) {
		t.Fatalf("reload: %v", err)
	}
	b, err := New(k)
	if err != nil {
		t.Fatal(err)
	}
	plain := []byte("password: hunter2")
	s1, _ := b.Seal(plain, []byte("c1/1"))
	s2, _ := b.Seal(plain, []byte("c1/1"))
	if bytes.Contains(s1, []byte("hunter2")) || bytes.Equal(s1, s2) {
		t.Fatal("sealed value shows the plain text or repeats")
	}
	if got, err := b.Open(s1, []byte("c1/1")); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("open: %q %v", got, err)
	}
	if _, err := b.Open(s1, []byte("c2/1")); err == nil {
		t.Fatal("opened with another row's aad")
	}
	other, _ := New(bytes.Repeat([]byte{1}, 32))
	if _, err := other.Open(s1, []byte("c1/1")); err == nil {
		t.Fatal("opened with another key")
	}
	if _, err := New([]byte("short")); err == nil {
		t.Fatal("short key accepted")
	}
	if _, err := LoadKey("", false); err == nil {
		t.Fatal("no key, no error")
	}
	t.Setenv(KeyEnv, "not base64!")
	if _, err := LoadKey(file, false); err == nil {
		t.Fatal("bad env key accepted")
	}
}
