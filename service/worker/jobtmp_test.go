package worker

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A worker killed with its job leaves the job's directory (an unpacked
// bundle, the child's home); the next worker removes it, and nothing a
// live worker holds, nothing just made, nothing not a job's.
func TestSweepJobTempsRemovesOnlyTheAbandoned(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	old := time.Now().Add(-2 * staleAfter)
	mk := func(name string, age time.Time) string {
		d := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(d, "tmp"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "tmp", "bundle"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(d, age, age); err != nil {
			t.Fatal(err)
		}
		return d
	}
	abandoned := mk(jobTempPrefix+"job-a-1", old)
	young := mk(jobTempPrefix+"job-b-1", time.Now())
	other := mk("kubexm-other", old)
	elsewhere := mk("elsewhere", old)
	link := filepath.Join(tmp, jobTempPrefix+"job-c-1")
	if err := os.Symlink(elsewhere, link); err != nil {
		t.Fatal(err)
	}
	held, err := newJobTemp("job-d")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(held.dir, old, old); err != nil {
		t.Fatal(err)
	}

	sweepJobTemps(slog.New(slog.NewTextHandler(io.Discard, nil)))

	if _, err := os.Lstat(abandoned); !os.IsNotExist(err) {
		t.Errorf("%s: want it removed, got %v", abandoned, err)
	}
	for _, d := range []string{young, other, elsewhere, link, held.dir, filepath.Join(elsewhere, "tmp", "bundle")} {
		if _, err := os.Lstat(d); err != nil {
			t.Errorf("%s: want it kept, got %v", d, err)
		}
	}
	if err := held.remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(held.dir); !os.IsNotExist(err) {
		t.Errorf("a job's own directory after its end: %v", err)
	}
}
