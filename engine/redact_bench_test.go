package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/engine/journal"
)

// The redactor runs on every event and journal record: its cost with ten
// secrets on a 10 KB output.
func BenchmarkRedactor(b *testing.B) {
	var secrets []string
	for i := range 10 {
		secrets = append(secrets, fmt.Sprintf("secret-%d-%s", i, strings.Repeat("x", 20)))
	}
	rd := journal.NewMasker(secrets)
	text := strings.Repeat("some ordinary command output, no secrets here; ", 200)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		rd.Str(text)
	}
}

func BenchmarkNewRedactor(b *testing.B) {
	var secrets []string
	for i := range 10 {
		secrets = append(secrets, fmt.Sprintf("secret-%d-%s", i, strings.Repeat("x", 20)))
	}
	for b.Loop() {
		journal.NewMasker(secrets)
	}
}
