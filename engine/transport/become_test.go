package transport

import (
	"bytes"
	"testing"
)

func TestBecomeHeader(t *testing.T) {
	var out bytes.Buffer
	h := NewBecomeHeader("KXM:1:pid=", "KXM:1:pw:", &out)
	// Split writes at awkward places, as a network would.
	for _, chunk := range []string{"We trust you...\nKXM:1:p", "w:", "Sorry, try again.\nKXM", ":1:pw:", "KXM:1:pid=42", "\nreal stderr\n", "more"} {
		h.Write([]byte(chunk))
	}
	if n := len(h.Prompted()); n != 2 {
		t.Errorf("prompts %d, want 2", n)
	}
	if pid := <-h.Started(); pid != 42 {
		t.Errorf("pid %d", pid)
	}
	if !h.IsStarted() {
		t.Error("not started after the PID line")
	}
	if out.String() != "real stderr\nmore" {
		t.Errorf("stderr %q", out.String())
	}
	if p := h.Preamble(); p != "We trust you...\nSorry, try again." {
		t.Errorf("preamble %q", p)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"": "''", "abc-1.2": "abc-1.2", "a b": "'a b'", "it's": `'it'\''s'`} {
		if got := ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
