package schema

import (
	"fmt"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/schema/rolevars"

	"github.com/mensylisir/kubexm"
)

// Every variable of every built-in role's defaults is declared in the
// role's meta/main.yaml, so a new variable cannot slip in unchecked; every
// declaration names a variable of the role's defaults; and every default
// that is not a template passes its own declaration.
func TestEveryRoleVariableDeclared(t *testing.T) {
	fsys := kubexm.Content()
	if _, err := rolevars.BuiltinRoleVars(); err != nil {
		t.Fatal(err)
	}
	n := 0
	err := fs.WalkDir(fsys, "roles", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Base(p) != "main.yaml" || path.Base(path.Dir(p)) != "defaults" {
			return err
		}
		role := path.Dir(path.Dir(p))
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		root, _, err := parseTree(p, data)
		if err != nil {
			return err
		}
		meta, err := fs.ReadFile(fsys, role+"/meta/main.yaml")
		if err != nil {
			t.Errorf("%s: %v", role, err)
			return nil
		}
		decls, err := rolevars.ParseRoleVars(role+"/meta/main.yaml", meta)
		if err != nil {
			t.Error(err)
			return nil
		}
		seen := map[string]bool{}
		for i, k := range root.Keys {
			name := k.Text
			seen[name] = true
			n++
			d, ok := decls[name]
			if !ok {
				t.Errorf("%s:%d: %s has no declaration in %s/meta/main.yaml (variables:)", p, k.Pos.Line, name, role)
				continue
			}
			if d.ReplacedBy != "" {
				t.Errorf("%s:%d: %s is declared no longer read (replaced_by), yet has a default", p, k.Pos.Line, name)
				continue
			}
			v := generic(root.Vals[i])
			if strings.Contains(fmt.Sprint(v), "{{") {
				continue // known when the role runs
			}
			d.Role = strings.TrimPrefix(role, "roles/")
			if msg, hint := (rolevars.RoleVars{name: d}).Check(name, v, false); msg != "" {
				t.Errorf("%s:%d: the default of %s fails its declaration: %s (%s)", p, k.Pos.Line, name, msg, hint)
			}
		}
		for name, d := range decls {
			if !seen[name] && d.ReplacedBy == "" {
				t.Errorf("%s/meta/main.yaml declares %s, which its defaults do not hold", role, name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 400 {
		t.Errorf("only %d role defaults found", n)
	}
}
