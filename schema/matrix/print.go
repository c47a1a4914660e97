package matrix

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// WriteText prints the matrix for people, as kubexm support shows it;
// defaults are the versions the roles install by default, by component
// (the matrix's own default when missing).
func (s *Support) WriteText(w io.Writer, defaults map[string]string) {
	k := s.Kubernetes
	fmt.Fprintf(w, "Support matrix: %s\n\n", s.Source)
	fmt.Fprintf(w, "Kubernetes: %s; mirrors: %s\n", s.KubernetesRange(), mirrorVar(k.Mirrors))
	var tested []string
	for _, m := range k.Minors {
		if p := k.TestedPatches[m]; p != "" {
			tested = append(tested, p)
		}
	}
	if len(tested) > 0 {
		fmt.Fprintf(w, "  checked with: %s (a newer patch is accepted with a warning)\n", strings.Join(tested, ", "))
	}
	sk := k.Skew
	fmt.Fprintf(w, "  version skew: upgrade %d minor at a time; API servers within %d minor; controller-manager and scheduler up to %d older; kubelet and kube-proxy up to %d older; kubectl within %d\n",
		sk.UpgradeMaxMinors, sk.APIServerMaxMinors, sk.ControlPlaneMaxOlderMinors, sk.NodeMaxOlderMinors, sk.KubectlMaxMinors)
	for _, m := range k.Minors {
		if g := k.FeatureGatesRemoved[m]; len(g) > 0 {
			fmt.Fprintf(w, "  feature gates removed by %s: %s\n", m, strings.Join(g, ", "))
		}
		if g := k.FeatureGatesAdded[m]; len(g) > 0 {
			fmt.Fprintf(w, "  feature gates introduced by %s (older minors refuse them): %s\n", m, strings.Join(g, ", "))
		}
	}
	fmt.Fprintln(w, "\nComponents:")
	for _, c := range s.Components {
		def := c.Default
		if d, ok := defaults[c.Name]; ok {
			def = d
		}
		fmt.Fprintf(w, "  %-12s %-6s default %-9s mirrors: %s\n", c.Name, c.ReleaseLines(), def, mirrorVar(c.Mirrors))
	}
	fmt.Fprintf(w, "  checksums: %s\n", s.Checksums)
	fmt.Fprintln(w, "\nChoices (cluster.yaml):")
	for _, ch := range s.Choices {
		fmt.Fprintf(w, "  %s", ch.Field)
		if ch.OnlyWith != "" {
			fmt.Fprintf(w, "  (with %s)", ch.OnlyWith)
		}
		fmt.Fprintln(w)
		for _, v := range ch.Values {
			writeValue(w, "    ", v)
		}
	}
	if len(s.OSPackageSets) > 0 {
		fmt.Fprintln(w, "\nOS packages in offline bundles (kubexm artifact export):")
	}
	for _, v := range s.OSPackageSets {
		writeValue(w, "  ", v)
	}
	names := slices.Sorted(maps.Keys(s.PlaybookChoices))
	if len(names) > 0 {
		fmt.Fprintln(w, "\nRefused by one playbook only (installed by create-cluster):")
	}
	for _, name := range names {
		for _, ch := range s.PlaybookChoices[name] {
			for _, v := range ch.Values {
				fmt.Fprintf(w, "  %s: %s %s%s: %s\n", name, ch.Field, v.Value, onlyWith(ch), v.Reason)
			}
		}
	}
}

// writeValue prints a value's status with its reason, or with its evidence
// (empty without --evidence).
func writeValue(w io.Writer, indent string, v ChoiceValue) {
	note := v.Tested
	if !v.Supported() {
		note = v.Reason
	}
	if note != "" {
		note = ": " + note
	}
	fmt.Fprintf(w, "%s%-10s %s%s\n", indent, v.Value, v.Status, note)
}

// mirrorVar says where a component comes from as a user changes it: the
// role variable of the matrix's "FILE VARIABLE", set with -e.
func mirrorVar(ref string) string {
	if _, variable, ok := strings.Cut(ref, " "); ok {
		return "-e " + variable
	}
	return ref
}

// onlyWith shows a choice's condition: " (with spec.etcd.type=kubexm)".
func onlyWith(ch Choice) string {
	if ch.OnlyWith == "" {
		return ""
	}
	return " (with " + ch.OnlyWith + ")"
}

// Markdown is README.md's "what works" table of cluster.yaml choices
// (kubexm support -o markdown).
func (s *Support) Markdown() string {
	var b strings.Builder
	b.WriteString(fmt.Sprintf("Kubernetes %s; ", s.KubernetesRange()))
	var comps []string
	for _, c := range s.Components {
		comps = append(comps, c.Name+" "+c.ReleaseLines())
	}
	b.WriteString(strings.Join(comps, ", ") + ".\n\n")
	b.WriteString("| cluster.yaml choice | installed | not supported yet (refused by `config validate` and `play`) |\n|---|---|---|\n")
	for _, ch := range s.Choices {
		field := "`" + ch.Field + "`"
		if ch.OnlyWith != "" {
			field += " (with " + ch.OnlyWith[strings.LastIndexByte(ch.OnlyWith, '.')+1:] + ")"
		}
		b.WriteString(fmt.Sprintf("| %s | %s | %s |\n", field, strings.Join(ch.Supported(), ", "), strings.Join(ch.NotSupported(), ", ")))
	}
	names := slices.Sorted(maps.Keys(s.PlaybookChoices))
	if len(names) > 0 {
		b.WriteString("\nRefused by one playbook only (`play NAME` refuses them before any task; create-cluster installs them):\n\n")
	}
	for _, name := range names {
		for _, ch := range s.PlaybookChoices[name] {
			for _, v := range ch.Values {
				b.WriteString(fmt.Sprintf("- `%s`: `%s` %s%s\n", name, ch.Field, v.Value, onlyWith(ch)))
			}
		}
	}
	return b.String()
}
