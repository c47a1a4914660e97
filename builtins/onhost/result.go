package onhost

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/engine/step"
)

// Done builds the result of a builtin that made (or in check mode would
// make) the listed changes.
func Done(env *step.Env, changes []string, data map[string]any, diff string) step.Result {
	res := step.Result{Changed: len(changes) > 0, Data: data}
	if len(changes) > 0 {
		res.Msg = strings.Join(changes, ", ")
		if env.Check {
			res.Msg = "would " + res.Msg
		}
	}
	if env.Diff {
		res.Diff = diff
	}
	return res
}

// Missing is the error for something not found (a source, a checksums
// file, the file's entry in it), with hint, the caller's advice, after it.
func Missing(hint, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	if hint != "" {
		return fmt.Errorf("%w: %s", err, hint)
	}
	return err
}

// Sleep waits d, or less when ctx ends first (the retries' backoff).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// FirstLine is the first line of s, marked when more follow.
func FirstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

// AnyList turns lines into a list value a task registers.
func AnyList(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
