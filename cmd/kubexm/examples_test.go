package main

import (
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/engine"
)

// TestBuiltinExamplesLoad keeps docs/builtins.md honest: every example a
// builtin documents must load as a task, with valid arguments and templates.
func TestBuiltinExamplesLoad(t *testing.T) {
	reg := builtinRegistry()
	for _, b := range builtins.All() {
		spec := b.Spec()
		for i, ex := range spec.Examples {
			var pb strings.Builder
			pb.WriteString("- hosts: localhost\n  tasks:\n")
			// An example is either one builtin call or whole tasks ("- name: ...").
			whole := strings.HasPrefix(ex, "- ")
			for j, line := range strings.Split(strings.TrimRight(ex, "\n"), "\n") {
				prefix := "      "
				switch {
				case whole:
					prefix = "    "
				case j == 0:
					prefix = "    - "
				}
				pb.WriteString(prefix + line + "\n")
			}
			_, err := engine.LoadBytes(t.Context(), spec.Name+"-example.yaml", []byte(pb.String()), engine.LoadOptions{Builtins: reg})
			if err != nil {
				t.Errorf("%s example %d does not load: %v\n%s", spec.Name, i+1, err, ex)
			}
		}
	}
}
