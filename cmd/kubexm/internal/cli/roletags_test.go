package cli

import (
	"slices"
	"strings"
	"testing"
)

// stepTags are, per role, the tags of the steps a site may skip, and the
// prefix of the names of exactly the tasks each one covers.
var stepTags = map[string]map[string]string{
	"os": {
		"selinux": "SELinux - ", "swap": "Swap - ", "firewall": "Firewall - ", "hostname": "Hostname - ",
		"hosts-file": "/etc/hosts - ", "kernel-modules": "Kernel modules - ", "sysctl": "Sysctl - ",
		"packages": "Packages - ", "chrony": "Chrony - ", "timezone": "Timezone - ",
	},
	"preflight": {
		"check-hardware": "Hardware - ", "check-kernel": "Kernel - ", "check-hostname": "Hostname - ",
		"check-time": "Time - ", "check-existing": "Existing installation - ", "check-ports": "Ports - ",
		"check-runtime": "Container runtime - ", "check-dns": "resolv.conf - ", "check-selinux": "SELinux - ", "check-firewall": "Firewall - ", "check-swap": "Swap - ",
	},
}

// roleTasks lists a role's task names in create-cluster's task list. A task
// listed under an include (indented deeper) is named after it, "include /
// task", so that it counts as part of the include's step.
func roleTasks(t *testing.T, role string, args ...string) []string {
	t.Helper()
	out, err := runCmd(t, realApp(), append([]string{"create-cluster", "--list-tasks"}, args...)...)
	if err != nil {
		t.Fatalf("list-tasks %v: %v\n%s", args, err, out)
	}
	type parent struct {
		indent int
		name   string
	}
	var names []string
	var stack []parent
	for _, l := range strings.Split(out, "\n") {
		trimmed := strings.TrimLeft(l, " ")
		name, ok := strings.CutPrefix(trimmed, role+" : ")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, "\t")
		indent := len(l) - len(trimmed)
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 {
			name = stack[len(stack)-1].name + " / " + name
		}
		stack = append(stack, parent{indent, name})
		names = append(names, name)
	}
	return names
}

// TestSkipTagsSkipsExactlyThatStep: --skip-tags <step> leaves out the
// step's tasks and nothing else of the os role, for each step tag; the
// tags are listed by --list-tags.
func TestSkipTagsSkipsExactlyThatStep(t *testing.T) {
	tags, err := runCmd(t, realApp(), "create-cluster", "--list-tags")
	if err != nil {
		t.Fatal(err)
	}
	for role, steps := range stepTags {
		all := roleTasks(t, role)
		if len(all) == 0 {
			t.Fatalf("create-cluster lists no %s tasks", role)
		}
		for tag, prefix := range steps {
			if !strings.Contains(tags, tag) {
				t.Errorf("--list-tags does not list %s:\n%s", tag, tags)
			}
			want := slices.DeleteFunc(slices.Clone(all), func(n string) bool { return strings.HasPrefix(n, prefix) })
			if len(want) == len(all) {
				t.Errorf("no %s task is named %q...", role, prefix)
			}
			if got := roleTasks(t, role, "--skip-tags", tag); !slices.Equal(got, want) {
				t.Errorf("--skip-tags %s: %s tasks\n got %q\nwant %q", tag, role, got, want)
			}
		}
	}
	// Only one step: the probes it needs run too.
	all := roleTasks(t, "os")
	got := roleTasks(t, "os", "--tags", "chrony")
	want := []string{"State directory for backups and the cluster marker", "Mark the host as a member of this cluster", "Probe the current state", "Name the probe's findings"}
	for _, n := range all {
		if strings.HasPrefix(n, "Chrony - ") {
			want = append(want, n)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("--tags chrony: os tasks\n got %q\nwant %q", got, want)
	}
}
