package cli

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm"
	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/lifecycle"
)

// TestBuiltinExamplesLoad keeps docs/builtins.md honest: every example a
// builtin documents must load as a task, with valid arguments and templates.
func TestBuiltinExamplesLoad(t *testing.T) {
	reg := builtins.ByName()
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

// guide is docs/guide.md.
func guide(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../../../docs/guide.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestGuideClusterExamplesValidate: every complete cluster.yaml of
// docs/guide.md (a yaml block starting with apiVersion) passes config
// validate, and the HA example (3 masters, 2 workers, haproxy) is there.
func TestGuideClusterExamplesValidate(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	// The examples name ~/.ssh/id_ed25519: validation checks that it exists.
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "id_ed25519"), []byte("a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	n, ha := 0, false
	for i, block := range strings.Split(guide(t), "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if !strings.HasPrefix(block, "apiVersion:") {
			continue
		}
		n++
		file := filepath.Join(dir, fmt.Sprintf("example-%d.yaml", i+1))
		if err := os.WriteFile(file, []byte(block), 0o600); err != nil {
			t.Fatal(err)
		}
		c, _, err := lifecycle.LoadWith(file, nil)
		if err != nil {
			t.Errorf("docs/guide.md's cluster.yaml example %d is not valid: %v\n%s", n, err, block)
			continue
		}
		rg := c.Spec.RoleGroups
		if len(rg.Master) == 3 && len(rg.Worker) == 2 && len(rg.Etcd) == 3 && c.Spec.ControlPlaneEndpoint.InternalLoadbalancer == "haproxy" {
			ha = true
		}
	}
	if n == 0 || !ha {
		t.Errorf("docs/guide.md has %d complete cluster.yaml examples, the HA one (3 masters, 3 etcd, 2 workers, haproxy): %v", n, ha)
	}
}

// TestGuideOSTable: the guide's table of target operating systems is
// preflight's own list (preflight_supported_os).
func TestGuideOSTable(t *testing.T) {
	data, err := fs.ReadFile(kubexm.Content(), "roles/preflight/defaults/main.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var defaults struct {
		OS map[string][]string `yaml:"preflight_supported_os"`
	}
	if err := yaml.Unmarshal(data, &defaults); err != nil || len(defaults.OS) == 0 {
		t.Fatalf("preflight_supported_os: %v", err)
	}
	want := "| os-release ID | VERSION_ID |\n|---|---|\n"
	for _, id := range slices.Sorted(maps.Keys(defaults.OS)) {
		want += fmt.Sprintf("| %s | %s |\n", id, strings.Join(defaults.OS[id], ", "))
	}
	const begin, end = "<!-- begin: preflight_supported_os -->\n", "<!-- end: preflight_supported_os -->"
	_, rest, ok1 := strings.Cut(guide(t), begin)
	table, _, ok2 := strings.Cut(rest, end)
	if !ok1 || !ok2 || table != want {
		t.Errorf("docs/guide.md's table of operating systems is not roles/preflight's preflight_supported_os; it should read:\n%s", want)
	}
}
