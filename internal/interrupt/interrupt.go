// Package interrupt is how a kubexm process stops at a signal: the first
// cancels the run (so that it stops the commands on the hosts and prints
// its recap), a second, or a run that does not stop within a grace period,
// exits at once.
package interrupt

import (
	"context"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// Watch cancels the run at the first signal, so it stops the
// commands on the hosts and prints its recap; it exits at once at a second
// signal, or when the run has not stopped within grace (a phase that does
// not watch the context, a connection that does not answer).
//
// Nothing may stand between a signal and its effect: under load stderr can
// be a pipe its reader has stopped draining, and a cancellation can take a
// while to reach every context, so both happen beside the watch, the grace
// runs from the first signal, and the last message gets at most exitFlush
// to be written; the grace ends twice that early, which leaves the process
// exitFlush to be scheduled and gone within grace even on a loaded machine.
func Watch(sigs <-chan os.Signal, cancel context.CancelCauseFunc, grace time.Duration, stderr io.Writer, exit func(int)) {
	sig := <-sigs
	deadline := time.NewTimer(max(grace-2*exitFlush, 0))
	defer deadline.Stop()
	say := newAsyncWriter(stderr)
	go cancel(fmt.Errorf("interrupted by %s", sigName(sig)))
	say.printf("\n%s: stopping the commands on the hosts (at most %s); press Ctrl-C again to exit at once\n", sigName(sig), grace)
	select {
	case sig = <-sigs:
		say.printf("%s again: exiting now; commands may still be running on the hosts\n", sigName(sig))
	case <-deadline.C:
		say.printf("kubexm did not stop within %s of %s: exiting now; commands may still be running on the hosts\n", grace, sigName(sig))
	}
	say.flush(exitFlush)
	code := 130
	if sig == syscall.SIGTERM {
		code = 143
	}
	exit(code)
}

// exitFlush is how long an exit waits for its message to be written.
const exitFlush = 200 * time.Millisecond

// asyncWriter writes messages in order on a goroutine of its own, so a
// writer that blocks delays only the messages; one that is still blocked
// when the buffer is full loses the newer ones.
type asyncWriter struct {
	msgs chan string
	done chan struct{}
}

func newAsyncWriter(w io.Writer) *asyncWriter {
	a := &asyncWriter{msgs: make(chan string, 8), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		for m := range a.msgs {
			_, _ = io.WriteString(w, m)
		}
	}()
	return a
}

func (a *asyncWriter) printf(format string, args ...any) {
	select {
	case a.msgs <- fmt.Sprintf(format, args...):
	default:
	}
}

// flush closes a and waits up to d for what it holds to be written.
func (a *asyncWriter) flush(d time.Duration) {
	close(a.msgs)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-a.done:
	case <-t.C:
	}
}

func sigName(s os.Signal) string {
	if s == os.Interrupt {
		return "SIGINT"
	}
	if s == syscall.SIGTERM {
		return "SIGTERM"
	}
	return s.String()
}
