package transport

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// SumCache remembers sha256 sums of control-machine files, keyed by path and
// stat (size, modification and change times, inode, device), so a file sent
// to many hosts is read once. With Dir, a sum is also recorded in a file
// there and a later run whose stat of the file is the same takes it from
// the record instead of reading the file again: any write to the file
// changes its ctime, which only the kernel sets. Safe for concurrent use;
// share one per run (ssh.Options.Sums, local.WithSums).
type SumCache struct {
	// Dir holds the records (one file per path, named by the path's sha256);
	// empty: sums live only as long as the cache.
	Dir string

	mu sync.Mutex
	m  map[sumKey]*sumEntry
}

// WorkDirSums is the cache of a run from the cluster's work directory
// workDir: its records in workDir/sums ("" workDir: none).
func WorkDirSums(workDir string) *SumCache {
	if workDir == "" {
		return &SumCache{}
	}
	return &SumCache{Dir: filepath.Join(workDir, "sums")}
}

type sumKey struct {
	path string
	stat string
}

type sumEntry struct {
	done chan struct{}
	sum  string
	err  error
}

// Sum returns the hex sha256 of a local regular file.
func (c *SumCache) Sum(p string) (string, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("source %s: %w", p, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("source %s is not a regular file", p)
	}
	st, ctime := statKey(fi)
	key := sumKey{p, st}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[sumKey]*sumEntry{}
	}
	e, ok := c.m[key]
	if !ok {
		e = &sumEntry{done: make(chan struct{})}
		c.m[key] = e
	}
	c.mu.Unlock()
	if ok {
		<-e.done
		return e.sum, e.err
	}
	e.sum, e.err = c.hash(p, st, ctime)
	close(e.done)
	if e.err != nil {
		c.mu.Lock()
		delete(c.m, key)
		c.mu.Unlock()
	}
	return e.sum, e.err
}

// hash reads the record of p when its stat is st, else the file. A sum is
// recorded only when the stat did not move while the file was read and the
// ctime is 2 s old: a write in the same timestamp tick as the recorded
// ctime would otherwise go unseen. ctime is zero where the platform does
// not give it; nothing is recorded then.
func (c *SumCache) hash(p, st string, ctime time.Time) (string, error) {
	rec := c.record(p)
	if rec != "" && !ctime.IsZero() {
		if b, err := os.ReadFile(rec); err == nil {
			if line, sum, ok := strings.Cut(strings.TrimSuffix(string(b), "\n"), "\n"); ok && line == st && len(sum) == 64 {
				return sum, nil
			}
		}
	}
	sum, err := FileSha256(p)
	if err == nil && sum == "" {
		err = fmt.Errorf("source %s does not exist", p)
	}
	if err != nil || rec == "" || ctime.IsZero() {
		return sum, err
	}
	fi, serr := os.Stat(p)
	if after, _ := statKey(fi); serr != nil || after != st || time.Since(ctime) < 2*time.Second {
		_ = os.Remove(rec)
		return sum, nil
	}
	// A record that cannot be written costs the next run a read, nothing else.
	if os.MkdirAll(c.Dir, 0o700) == nil {
		tmp := fmt.Sprintf("%s.%d", rec, os.Getpid())
		if os.WriteFile(tmp, []byte(st+"\n"+sum+"\n"), 0o600) != nil || os.Rename(tmp, rec) != nil {
			_ = os.Remove(tmp)
		}
	}
	return sum, nil
}

func (c *SumCache) record(p string) string {
	if c.Dir == "" {
		return ""
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return ""
	}
	h := sha256.Sum256([]byte(abs))
	return filepath.Join(c.Dir, hex.EncodeToString(h[:]))
}

// SHA256Func defines the shell function kxsha256 FILE, which prints a line
// starting with FILE's sha256 in hex: OpenSSL's where the host has a working
// openssl (its SHA-256 uses the CPU's SHA extensions: 20 MB in 23 ms where
// coreutils' sha256sum takes 57 ms on the test machines), else coreutils'.
// Every script that hashes a file on a host defines it, so the choice has
// one home.
const SHA256Func = `kxsha256() {
kxo=$(openssl dgst -sha256 -r -- "$1" 2>/dev/null) && printf '%s\n' "$kxo" && return 0
sha256sum -- "$1"
}
`

// IsSHA256Hex says whether s is a sha256 in hex (64 digits, either case),
// as sha256sum and checksums files write it.
func IsSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
