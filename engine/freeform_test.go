package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/engine/load"
	"github.com/mensylisir/kubexm/engine/step"
)

// Ansible's name=value words in a free-form string are arguments; the rest
// of a command line is kept byte for byte (issue 46: `command: ls
// chdir=/srv` passed chdir=/srv to ls).
func TestFreeFormArgs(t *testing.T) {
	command := step.Spec{Name: "shell", FreeForm: "cmd", Args: []step.Arg{{Name: "cmd", Type: step.String}, {Name: "chdir", Type: step.String}, {Name: "creates", Type: step.String}}}
	debug := step.Spec{Name: "debug", FreeForm: "msg", Args: []step.Arg{{Name: "msg", Type: step.Any}, {Name: "var", Type: step.String}, {Name: "verbosity", Type: step.Int}}}
	for _, tc := range []struct {
		spec step.Spec
		in   string
		want string // the arguments, or the error's start with "error: "
	}{
		{command, "ls chdir=/srv", "map[chdir:/srv cmd:ls]"},
		{command, "echo hi > f creates=f", "map[cmd:echo hi > f creates:f]"},
		{command, `echo "creates=x" 'chdir=y' a=b`, `map[cmd:echo "creates=x" 'chdir=y' a=b]`},
		{command, "chdir=/tmp ls  -l   -a", "map[chdir:/tmp cmd:ls  -l   -a]"},
		{command, "# kubeadm's\ncd /x creates=y\n", "map[cmd:# kubeadm's\ncd /x creates=y\n]"},
		{command, `cat "{{ .f }}" chdir="/a b"`, `map[chdir:/a b cmd:cat "{{ .f }}"]`},
		{command, "echo {{ .x | default \"a=b c\" }}", `map[cmd:echo {{ .x | default "a=b c" }}]`},
		{command, "echo hi executable=/bin/bash", "error: executable=: Ansible's shell argument executable has no kubexm equivalent"},
		{command, "creates=f", "error: no command left after creates"},
		{command, `echo "unclosed`, "error: unclosed \" quote"},
		{debug, "var=x", "map[var:x]"},
		{debug, `msg="two words" verbosity=2`, "map[msg:two words verbosity:2]"},
		{debug, "hello a=b", "map[msg:hello a=b]"},
		{debug, "var=x and more", "error: \"var=x and more\" mixes name=value arguments (var=x) with other text (and more)"},
		{debug, "verbosity=high", "error: verbosity=high: verbosity is a number"},
	} {
		got, err := load.FreeFormArgs(tc.spec, tc.in)
		s := fmt.Sprint(got)
		if err != nil {
			s = "error: " + err.Error()
		}
		if !strings.HasPrefix(s, tc.want) {
			t.Errorf("%s: %q = %q, want %q", tc.spec.Name, tc.in, s, tc.want)
		}
	}
}
