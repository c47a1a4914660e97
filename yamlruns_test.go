package kubexm_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Playbooks are composed, not copied (issue 48): a play list several
// playbooks share is one playbook they import (import_playbook), a
// keyword every play would restate is the engine's default. The figure is
// the runs of identical YAML lines: a run is six or more consecutive lines
// (blank and comment lines passed over, the white space around a line
// folded) that stand in two or more places of the built-in playbooks and
// roles, counted once per distinct text. files/ (upstream's manifests and
// CRDs, copied as they are) does not count.
//
// yamlRunCeiling is the ratchet: 98 on main before composition began, 80
// once gather_facts: false was the engine's default, 62 with play_defaults
// and the plays create-cluster shares (playbooks/create-cluster/*.yaml
// beside its playbook.yaml), 52 with upgrade's node plays one per group
// (masters, workers) whatever kubernetes.type, 44 with the identity play
// imported by upgrade and upgrade-etcd too, images' and backup's blocks and
// the control plane's readiness check as one task file, 42 with the
// remaining kubectl tasks on the k8s builtin, 31 with rotate-ca's reissue
// and retire phases merging the trust phase's plays (YAML anchors), the
// API servers' etcd members one task file of roles/nodes, CoreDNS's play
// imported by upgrade and calico's diagnostics in its rollout's message;
// the aim under 40. It may only go down: a change over it fails listing the runs,
// and one under it asks for the figure to be lowered.
const (
	yamlRunCeiling = 31
	yamlRunLines   = 6
)

// yamlLine is one line of a file that counts.
type yamlLine struct {
	text string
	line int
}

// yamlRun is one run's text with the places it stands in.
type yamlRun struct {
	text   string
	places []string
}

func yamlRuns(files map[string][]yamlLine, min int) []yamlRun {
	type at struct {
		file string
		i    int
	}
	windows := map[string][]at{}
	for _, f := range slices.Sorted(func(yield func(string) bool) {
		for f := range files {
			if !yield(f) {
				return
			}
		}
	}) {
		seq := files[f]
		for i := 0; i+min <= len(seq); i++ {
			var b strings.Builder
			for _, l := range seq[i : i+min] {
				b.WriteString(l.text)
				b.WriteByte('\n')
			}
			windows[b.String()] = append(windows[b.String()], at{f, i})
		}
	}
	runs := map[string]map[string]bool{}
	for _, locs := range windows {
		for x := range locs {
			for y := x + 1; y < len(locs); y++ {
				a, b := locs[x], locs[y]
				sa, sb := files[a.file], files[b.file]
				if a.file == b.file && b.i-a.i < min {
					continue // a run overlapping itself
				}
				if a.i > 0 && b.i > 0 && sa[a.i-1].text == sb[b.i-1].text {
					continue // not where the run starts
				}
				n := 0
				for a.i+n < len(sa) && b.i+n < len(sb) && sa[a.i+n].text == sb[b.i+n].text && (a.file != b.file || a.i+n != b.i) {
					n++
				}
				var text []string
				for _, l := range sa[a.i : a.i+n] {
					text = append(text, l.text)
				}
				key := strings.Join(text, "\n")
				if runs[key] == nil {
					runs[key] = map[string]bool{}
				}
				runs[key][fmt.Sprintf("%s:%d", a.file, sa[a.i].line)] = true
				runs[key][fmt.Sprintf("%s:%d", b.file, sb[b.i].line)] = true
			}
		}
	}
	var out []yamlRun
	for text, places := range runs {
		out = append(out, yamlRun{text, slices.Sorted(func(yield func(string) bool) {
			for p := range places {
				if !yield(p) {
					return
				}
			}
		})})
	}
	slices.SortFunc(out, func(a, b yamlRun) int {
		return strings.Count(b.text, "\n")*len(b.places) - strings.Count(a.text, "\n")*len(a.places)
	})
	return out
}

func yamlLines(data []byte) []yamlLine {
	var out []yamlLine
	for i, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		out = append(out, yamlLine{l, i + 1})
	}
	return out
}

// TestDuplicatedYAMLRuns counts the runs in the built-in playbooks and roles.
func TestDuplicatedYAMLRuns(t *testing.T) {
	files := map[string][]yamlLine{}
	for _, root := range []string{"playbooks", "roles"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel := filepath.ToSlash(p)
			if ext := filepath.Ext(rel); (ext != ".yaml" && ext != ".yml") || strings.Contains(rel, "/files/") {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files[rel] = yamlLines(data)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	runs := yamlRuns(files, yamlRunLines)
	t.Logf("runs of %d+ identical YAML lines in playbooks/ and roles/: %d (ceiling %d)", yamlRunLines, len(runs), yamlRunCeiling)
	switch {
	case len(runs) > yamlRunCeiling:
		var b strings.Builder
		for _, r := range runs {
			fmt.Fprintf(&b, "  %d lines at %s: %s\n", strings.Count(r.text, "\n")+1, strings.Join(r.places, ", "), strings.SplitN(r.text, "\n", 2)[0])
		}
		t.Errorf("%d runs of %d+ identical YAML lines, over the ceiling %d: import the shared plays (import_playbook), include the shared tasks, or leave a keyword to its default rather than copy; the runs, most lines first:\n%s",
			len(runs), yamlRunLines, yamlRunCeiling, b.String())
	case len(runs) < yamlRunCeiling:
		t.Errorf("%d runs of %d+ identical YAML lines, under the ceiling %d: lower yamlRunCeiling in yamlruns_test.go", len(runs), yamlRunLines, yamlRunCeiling)
	}
}

// TestYAMLRunsCounts keeps the counter honest: a run shared by two files,
// one standing twice in a file, and shorter ones that do not count.
func TestYAMLRunsCounts(t *testing.T) {
	lines := func(s string) []yamlLine { return yamlLines([]byte(s)) }
	six := "a: 1\nb: 2\n# a comment\nc: 3\n\nd: 4\ne: 5\nf: 6\n"
	files := map[string][]yamlLine{
		"x.yaml": lines("x: 0\n" + six + "g: 7\n"),
		"y.yaml": lines(six + "g: 7\nz: 9\n" + six),
		"z.yaml": lines("a: 1\nb: 2\nc: 3\nd: 4\ne: 5\n"),
	}
	runs := yamlRuns(files, 6)
	var got []string
	for _, r := range runs {
		got = append(got, fmt.Sprintf("%d %v", strings.Count(r.text, "\n")+1, r.places))
	}
	want := []string{"6 [x.yaml:2 y.yaml:1 y.yaml:11]", "7 [x.yaml:2 y.yaml:1]"}
	if !slices.Equal(got, want) {
		t.Errorf("yamlRuns found %q, want %q", got, want)
	}
}
