package playbook

import (
	"fmt"
	"sort"

	"github.com/mensylisir/kubexm/internal/suggest"
)

// DidYouMean returns ` (did you mean "x"?)` for the closest candidate, or ""
// when nothing is close.
func DidYouMean(got string, candidates []string) string {
	best := suggest.Closest(got, candidates)
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func KeysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ansibleKeys maps Ansible task and play keywords kubexm does not have to
// the kubexm way of saying the same.
var ansibleKeys = map[string]string{
	"with_items":         `use loop: with a list, or a template giving one: loop: "{{ .packages }}"`,
	"with_list":          `use loop: with a list, or a template giving one: loop: "{{ .packages }}"`,
	"with_dict":          `use loop over the keys, loop: "{{ keys .m | sortAlpha }}", and read {{ index .m .item }}`,
	"with_fileglob":      `list the files with a command task and register, then loop over {{ .result.stdout_lines }}`,
	"with_sequence":      `use loop: "{{ until 5 }}" (0 to 4) or "{{ untilStep 1 10 2 }}"`,
	"with_nested":        `use an include_tasks with loop inside a task with loop (loop_control: {loop_var: outer})`,
	"with_subelements":   `use an include_tasks with loop inside a task with loop (loop_control: {loop_var: outer})`,
	"with_together":      `loop over indexes: loop: "{{ until (len .a) }}" and read {{ index .a .item }} and {{ index .b .item }}`,
	"with_first_found":   `test the candidates with a command task and register, or name the file directly`,
	"loop_with":          `use loop:`,
	"become_user":        `kubexm has no become_user: become runs as root through sudo; to run one command as another user write command: {argv: [runuser, -u, USER, --, ...]}`,
	"become_method":      `become always uses sudo`,
	"become_flags":       `become always uses sudo`,
	"include_vars":       `put the variables in the play's vars_files:, a role's defaults/ or vars/, or read a file at run time with a task that registers it and set_fact: {x: "{{ .result.stdout | fromYaml }}"}`,
	"include":            `use include_tasks: (dynamic) or import_tasks: (static)`,
	"local_action":       `use the builtin with delegate_to: localhost`,
	"action":             `name the builtin as the key: command: ..., not action: command ...`,
	"async":              `kubexm has no async tasks; use timeout: to bound a task, and strategy: free to let hosts run ahead`,
	"poll":               `kubexm has no async tasks; use timeout: to bound a task`,
	"delegate_facts":     `set_fact sets facts on the host running the task; read another host's variables through hostvars`,
	"throttle":           `use --forks to bound parallelism, or serial: on the play`,
	"remote_user":        `the user is set per host in the inventory (cluster.yaml hosts[].user)`,
	"vars_prompt":        `pass values with -e name=value`,
	"connection":         `connection: local is a play keyword; per host, the inventory decides (ansible_connection=local)`,
	"ignore_unreachable": `an unreachable host leaves the play; run again with --limit after fixing it`,
	"module_defaults":    `repeat the arguments, or keep them in a variable`,
	"collections":        `kubexm has no collections: builtins are listed in docs/builtins.md`,
	"debugger":           `read the failing task's message; -v and -vv show more`,
	"order":              `hosts run in inventory order`,
	"gather_subset":      `setup gathers every fact in one round trip`,
}

// AnsibleHint returns "; HINT" for an Ansible keyword kubexm does not
// have, or "".
func AnsibleHint(key string) string {
	if h, ok := ansibleKeys[key]; ok {
		return "; " + h
	}
	if len(key) > 5 && key[:5] == "with_" {
		return "; " + ansibleKeys["loop_with"]
	}
	return ""
}
