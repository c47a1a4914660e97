package transport

import (
	"os"
	"path/filepath"
	"strings"
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

// A record lets a later run (a new cache) take the sum without reading the
// file, until the file is written: one byte changed in place with the size
// and the mtime put back is still read again, as its ctime moved.
func TestSumCacheRecords(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "kubelet")
	if err := os.WriteFile(p, []byte("abc"), 0o755); err != nil {
		t.Fatal(err)
	}
	records := filepath.Join(dir, "sums")
	const abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if sum, err := (&SumCache{Dir: records}).Sum(p); err != nil || sum != abc {
		t.Fatalf("%s %v", sum, err)
	}
	if ents, _ := os.ReadDir(records); len(ents) != 0 {
		t.Fatalf("a file changed less than 2 s ago was recorded: %v", ents)
	}
	time.Sleep(2100 * time.Millisecond)
	if sum, err := (&SumCache{Dir: records}).Sum(p); err != nil || sum != abc {
		t.Fatalf("%s %v", sum, err)
	}
	ents, err := os.ReadDir(records)
	if err != nil || len(ents) != 1 {
		t.Fatalf("settled file not recorded: %v %v", ents, err)
	}
	rec := filepath.Join(records, ents[0].Name())
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	forged := "0000000000000000000000000000000000000000000000000000000000000000"
	line, _, _ := strings.Cut(string(b), "\n")
	if err := os.WriteFile(rec, []byte(line+"\n"+forged+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if sum, _ := (&SumCache{Dir: records}).Sum(p); sum != forged {
		t.Fatalf("the record was not used: %s", sum)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("x"), 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	sum, err := (&SumCache{Dir: records}).Sum(p)
	if err != nil || sum == forged || sum == abc {
		t.Fatalf("a changed file (size and mtime kept) got %s %v", sum, err)
	}
	if want, _ := FileSha256(p); sum != want {
		t.Fatalf("changed file: %s, want %s", sum, want)
	}
}
