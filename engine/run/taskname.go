package run

import (
	"regexp"
	"strings"

	"github.com/mensylisir/kubexm/engine/playbook"
)

// templateAction is one {{ }} action of a task name.
var templateAction = regexp.MustCompile(`\{\{.*?\}\}`)

// renderName renders a task name that holds a template ("{{ .x }} -
// apply") with the variables of host h, as Ansible names a task in its
// output: once per task, with the first host's variables. A name that does
// not render (a variable h does not have) or would hold a secret (it goes
// to events, the journal and the recap) shows each of its actions as "…",
// never the template itself.
func (pr *playRun) renderName(t *playbook.Task, h *hostState, il *includeLoop, hv map[string]any) string {
	if !strings.Contains(t.Name, "{{") {
		return t.Name
	}
	vars, err := pr.vars(h, t, il, hv)
	if err != nil {
		vars = nil
	}
	return pr.nameWith(t, vars)
}

// nameWith is renderName with the variables at hand (nil: none).
func (pr *playRun) nameWith(t *playbook.Task, vars map[string]any) string {
	if !strings.Contains(t.Name, "{{") {
		return t.Name
	}
	name := ""
	if vars != nil {
		// A name that would hold a secret is not shown rendered, not even
		// masked: the journal holds neither.
		if s, err := pr.r.ev.RenderString(t.Name, vars); err == nil && !pr.r.red.Holds(s) {
			name = s
		}
	}
	if name == "" {
		name = templateAction.ReplaceAllString(t.Name, "…")
	}
	pr.mu.Lock()
	pr.names[t] = name
	pr.mu.Unlock()
	return name
}

// taskName is t's name as its latest run on this play named it
// (renderName), or, before any, its name with the actions of a template
// shown as "…".
func (pr *playRun) taskName(t *playbook.Task) string {
	if !strings.Contains(t.Name, "{{") {
		return t.Name
	}
	pr.mu.Lock()
	name, ok := pr.names[t]
	pr.mu.Unlock()
	if ok {
		return name
	}
	return templateAction.ReplaceAllString(t.Name, "…")
}
