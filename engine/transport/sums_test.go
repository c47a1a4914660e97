package transport

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSumCache(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	var c SumCache
	sum, err := c.Sum(p)
	if err != nil || sum != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("%s %v", sum, err)
	}
	// A rewrite with other content is summed again (size and mtime differ).
	if err := os.WriteFile(p, []byte("abcd"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, time.Now(), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if sum, err := c.Sum(p); err != nil || sum != "88d4266fd4e6338d13b845fcf289579d209c897823b9217da3e161936f031589" {
		t.Fatalf("after a rewrite: %s %v", sum, err)
	}
	if _, err := c.Sum(p + ".missing"); err == nil {
		t.Fatal("missing file summed")
	}
	if _, err := c.Sum(filepath.Dir(p)); err == nil {
		t.Fatal("directory summed")
	}
}
