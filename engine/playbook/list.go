package playbook

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/mensylisir/kubexm/inventory"
)

// ListTasks writes, per play, the tasks that would run under the given
// --tags and --skip-tags, with their tags (like ansible-playbook
// --list-tasks).
func (pb *Playbook) ListTasks(w io.Writer, tags, skipTags []string) error {
	pb.header(w)
	for i, p := range pb.Plays {
		fmt.Fprintf(w, "\n  play #%d (%s): %s%s\tTAGS: [%s]\n", i+1, p.Hosts, p.Name, p.phaseNote(), strings.Join(p.Tags, ", "))
		fmt.Fprintln(w, "    tasks:")
		for _, sec := range p.Sections() {
			listTasks(w, sec, tags, skipTags, "      ")
		}
	}
	return nil
}

func (pb *Playbook) header(w io.Writer) {
	fmt.Fprintf(w, "playbook: %s", pb.Name)
	if pb.Version != "" {
		fmt.Fprintf(w, " (version %s)", pb.Version)
	}
	fmt.Fprintln(w)
	if ph := pb.Phases(); len(ph) > 0 {
		fmt.Fprintf(w, "phases: %s\n", strings.Join(ph, ", "))
	}
}

// phaseNote says which phase a play belongs to, and whether it is a hook's.
func (p *Play) phaseNote() string {
	switch {
	case p.Hook != "":
		return fmt.Sprintf("\tPHASE: %s (hook %s, %s)", p.Phase, p.Hook, p.Src)
	case p.Phase != "":
		return "\tPHASE: " + p.Phase
	}
	return ""
}

func listTasks(w io.Writer, ts []*Task, tags, skip []string, indent string) {
	for _, t := range ts {
		switch t.Kind {
		case KindBlock:
			listTasks(w, t.Block, tags, skip, indent)
			listTasks(w, t.Rescue, tags, skip, indent)
			listTasks(w, t.Always, tags, skip, indent)
			continue
		case KindMeta:
			continue
		}
		if !TagsSelected(t.Tags, tags, skip) {
			continue
		}
		names := TaskNames(t)
		name := names[len(names)-1]
		fmt.Fprintf(w, "%s%s\tTAGS: [%s]\n", indent, name, strings.Join(t.Tags, ", "))
		if t.Kind == KindInclude && t.Include.Static != nil {
			listTasks(w, t.Include.Static, tags, skip, indent+"  ")
		}
	}
}

// ListTags writes the tags each play uses.
func (pb *Playbook) ListTags(w io.Writer) error {
	pb.header(w)
	for i, p := range pb.Plays {
		set := map[string]bool{}
		for _, s := range p.Sections() {
			WalkTasks(s, nil, func(t *Task, _ []*Task) bool {
				for _, tag := range t.Tags {
					set[tag] = true
				}
				return true
			})
		}
		for _, tag := range p.Tags {
			set[tag] = true
		}
		fmt.Fprintf(w, "\n  play #%d (%s): %s%s\tTASK TAGS: [%s]\n", i+1, p.Hosts, p.Name, p.phaseNote(), strings.Join(KeysOf(set), ", "))
	}
	return nil
}

// ListHosts writes the hosts each play would run on.
func (pb *Playbook) ListHosts(w io.Writer, inv *inventory.Inventory, limit string) error {
	pb.header(w)
	var lim []string
	if limit != "" {
		l, _, err := MatchHosts(inv, limit)
		if err != nil {
			return fmt.Errorf("--limit: %w", err)
		}
		lim = l
	}
	for i, p := range pb.Plays {
		hosts, _, err := MatchHosts(inv, p.Hosts)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Pos, err)
		}
		if limit != "" {
			hosts = slices.DeleteFunc(hosts, func(h string) bool { return !slices.Contains(lim, h) })
		}
		fmt.Fprintf(w, "\n  play #%d (%s): %s\tHOSTS (%d):\n", i+1, p.Hosts, p.Name, len(hosts))
		for _, h := range hosts {
			fmt.Fprintf(w, "    %s\n", h)
		}
	}
	return nil
}
