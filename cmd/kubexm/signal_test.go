package main

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
		go watchSignals(sigs, cancel, grace, &out, func(c int) { exited <- c })
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
