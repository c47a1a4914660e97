package cli

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/schema/validate"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm/schema"
)

// TestBuiltinRolesSeeNoShadowedNames holds the conditions under which the
// built-in roles read the same values whatever the order of the levels
// between role defaults and -e: where a name is set at two levels, the
// result would depend on which ranks higher. So, across roles/ and
// playbooks/:
//   - no role default or role var is a name the cluster inventory sets
//     (spec, arch, address, ...), which now outranks role defaults;
//   - no play or header var is also some role's default;
//   - no role or include parameter is also set by set_fact or register,
//     which rank below them now and ranked above them before.
//
// The one ordering the playbooks do rely on, role defaults over the shared
// defaults_files, is checked by test/e2e's TestKubernetesTemplateSharedDefaults.
func TestBuiltinRolesSeeNoShadowedNames(t *testing.T) {
	root := repoRoot(t)
	cluster := putFile(t, filepath.Join(t.TempDir(), "cluster.yaml"), []byte(`apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata: {name: c}
spec:
  hosts:
  - {name: n1, address: localhost, internalAddress: "10.0.0.1,fd00::1", labels: {a: b}}
  roleGroups: {etcd: [n1], master: [n1], worker: [n1]}
`))
	c, _, err := validate.Load(cluster)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := schema.Inventory(c, "")
	if err != nil {
		t.Fatal(err)
	}
	invNames := map[string]bool{}
	for k := range inv.Vars {
		invNames[k] = true
	}
	for _, h := range inv.Hosts {
		for k := range h.Vars {
			invNames[k] = true
		}
	}

	roleDefaults := map[string]string{} // name -> role file defining it
	params := map[string]string{}       // name -> where it is passed
	dynamic := map[string]string{}      // name -> where set_fact/register sets it
	var walk func(v any, file string)
	walk = func(v any, file string) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				walk(e, file)
			}
		case map[string]any:
			for _, k := range []string{"include_role", "import_role", "include_tasks", "import_tasks"} {
				a, ok := x[k]
				if !ok {
					continue
				}
				for n := range mapOf(x["vars"]) {
					params[n] = file
				}
				for n := range mapOf(mapOf(a)["vars"]) {
					params[n] = file
				}
			}
			for n := range mapOf(x["set_fact"]) {
				dynamic[n] = file
			}
			if r, ok := x["register"].(string); ok {
				dynamic[r] = file
			}
			if r, ok := x["role"].(string); ok && r != "" { // roles: / dependencies: entries
				for n := range mapOf(x["vars"]) {
					params[n] = file
				}
			}
			for _, k := range []string{"block", "rescue", "always", "plays", "pre_tasks", "tasks", "post_tasks", "handlers", "roles", "dependencies"} {
				walk(x[k], file)
			}
		}
	}
	var playVars []struct{ name, file string }
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() || !strings.HasSuffix(p, ".yaml") || !(strings.HasPrefix(rel, "roles/") || strings.HasPrefix(rel, "playbooks/")) {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var doc any
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return nil // templates/ hold text that is not YAML
		}
		dir := filepath.Base(filepath.Dir(p))
		switch {
		case strings.Contains(rel, "/templates/") || strings.Contains(rel, "/files/"):
		case dir == "defaults" || dir == "vars":
			for n := range mapOf(doc) {
				if invNames[n] {
					t.Errorf("%s sets %s, which cluster.yaml's inventory sets too", rel, n)
				}
				if dir == "defaults" && !strings.HasPrefix(rel, "roles/artifacts/") {
					roleDefaults[n] = rel
				}
			}
		default:
			walk(doc, rel)
			if strings.HasPrefix(rel, "playbooks/") {
				m := mapOf(doc)
				for n := range mapOf(m["vars"]) {
					playVars = append(playVars, struct{ name, file string }{n, rel})
				}
				if plays, ok := m["plays"].([]any); ok {
					for _, pl := range plays {
						for n := range mapOf(mapOf(pl)["vars"]) {
							playVars = append(playVars, struct{ name, file string }{n, rel})
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(roleDefaults) == 0 || len(dynamic) == 0 || len(params) == 0 {
		t.Fatalf("found %d role defaults, %d set_fact/register names, %d parameters: the walk is broken", len(roleDefaults), len(dynamic), len(params))
	}
	for _, pv := range playVars {
		if f, ok := roleDefaults[pv.name]; ok {
			t.Errorf("%s: play variable %s is also a default of %s", pv.file, pv.name, f)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(params)) {
		if f, ok := dynamic[n]; ok {
			t.Errorf("%s passes %s as a parameter, and %s sets it with set_fact/register", params[n], n, f)
		}
	}
}

func mapOf(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// A play's vars_files outrank cluster.yaml's variables, so a play that loads
// a role's defaults that way silently undoes a user's setting of them (an
// etcd_version in cluster.yaml, say). Shared defaults belong in the
// playbook header's defaults_files, which ranks below the inventory.
func TestPlaybooksLoadNoRoleDefaultsAsPlayVars(t *testing.T) {
	root := repoRoot(t)
	books, err := filepath.Glob(filepath.Join(root, "playbooks", "*", "playbook.yaml"))
	if err != nil || len(books) == 0 {
		t.Fatalf("no playbooks under %s: %v", root, err)
	}
	for _, book := range books {
		b, err := os.ReadFile(book)
		if err != nil {
			t.Fatal(err)
		}
		var pb struct {
			Plays []struct {
				Name      string   `yaml:"name"`
				VarsFiles []string `yaml:"vars_files"`
			} `yaml:"plays"`
		}
		if err := yaml.Unmarshal(b, &pb); err != nil {
			t.Fatalf("%s: %v", book, err)
		}
		for _, p := range pb.Plays {
			for _, f := range p.VarsFiles {
				if strings.Contains(filepath.ToSlash(f), "/defaults/") {
					t.Errorf("%s: play %q loads %s through vars_files, above cluster.yaml's variables; name it in the header's defaults_files", book, p.Name, f)
				}
			}
		}
	}
}
