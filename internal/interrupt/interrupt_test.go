package interrupt

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The first signal cancels the run; a second one exits at once, and a run
// that does not stop exits after the grace period.
func TestWatchSignals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		second bool
		sig    os.Signal
		code   int
		says   string
	}{
		{"second signal", true, os.Interrupt, 130, "SIGINT again: exiting now"},
		{"grace over", false, syscall.SIGTERM, 143, "did not stop within"},
	} {
		sigs := make(chan os.Signal, 2)
		ctx, cancel := context.WithCancelCause(context.Background())
		exited := make(chan int, 1)
		var out strings.Builder
		grace := 200 * time.Millisecond
		if tc.second {
			grace = time.Hour
		}
		go Watch(sigs, cancel, grace, &out, func(c int) { exited <- c })
		sigs <- tc.sig
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
			t.Fatalf("%s: first signal did not cancel", tc.name)
		}
		if !strings.Contains(context.Cause(ctx).Error(), "interrupted by") {
			t.Errorf("%s: cause %v", tc.name, context.Cause(ctx))
		}
		if tc.second {
			sigs <- os.Interrupt
		}
		select {
		case c := <-exited:
			if c != tc.code {
				t.Errorf("%s: exit %d, want %d", tc.name, c, tc.code)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("%s: did not exit", tc.name)
		}
		time.Sleep(10 * time.Millisecond)
		if !strings.Contains(out.String(), tc.says) {
			t.Errorf("%s: said %q", tc.name, out.String())
		}
	}
}

// blockedWriter is a stderr whose reader stopped reading (a full pipe).
type blockedWriter struct{ release chan struct{} }

func (w blockedWriter) Write(p []byte) (int, error) {
	<-w.release
	return len(p), nil
}

// TestSignalsUnderLoad: issue 45 saw the second SIGTERM lost and exits
// 13-17 s after the first under load. Neither a stderr that blocks nor a
// cancellation that takes long may delay a signal: the second exits at once,
// and the first within the grace period counted from the signal itself.
func TestSignalsUnderLoad(t *testing.T) {
	for _, second := range []bool{true, false} {
		sigs := make(chan os.Signal, 2)
		stuck := make(chan struct{})
		// A cancellation that does not return (contexts with slow
		// AfterFuncs, a lock held by a busy run) must not hold the watch.
		cancel := func(error) { <-stuck }
		exited := make(chan time.Duration, 1)
		grace := 10 * time.Second
		if !second {
			grace = time.Second
		}
		start := time.Now()
		go Watch(sigs, cancel, grace, blockedWriter{stuck}, func(int) { exited <- time.Since(start) })
		sigs <- syscall.SIGTERM
		if second {
			time.Sleep(50 * time.Millisecond)
			sigs <- syscall.SIGTERM
		}
		select {
		case took := <-exited:
			if second && took > time.Second {
				t.Errorf("the second SIGTERM exited after %s, want at once", took)
			}
			if !second && took > grace {
				t.Errorf("exited %s after the first SIGTERM, want within %s", took, grace)
			}
		case <-time.After(grace + 5*time.Second):
			t.Errorf("second signal %v: no exit %s after the first", second, grace+5*time.Second)
		}
		close(stuck)
	}
}
