package schema

import (
	"strings"
	"testing"
)

// Each warning is a line of its own, with its place and path.
func TestWriteWarnings(t *testing.T) {
	var b strings.Builder
	WriteWarnings(&b, []Warning{{Pos: Pos{Line: 3, Col: 5}, Path: "spec.etcd", Message: "old"}, {Message: "no path"}})
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "warning: ") || !strings.HasSuffix(lines[0], ": spec.etcd: old") || !strings.HasSuffix(lines[1], ": no path") {
		t.Errorf("WriteWarnings:\n%s", b.String())
	}
}
