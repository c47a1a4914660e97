package explain

import (
	"slices"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/schema/matrix"

	"github.com/mensylisir/kubexm/schema/validate"

	"github.com/mensylisir/kubexm/schema"
)

func support(t *testing.T) *matrix.Support {
	t.Helper()
	s, err := matrix.BuiltinSupport()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestExplainLeaf(t *testing.T) {
	s := support(t)
	c, _, err := validate.ParseWith("m.yaml", []byte(schema.MinimalCluster), s)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Explain("spec.etcd.type", s)
	if err != nil {
		t.Fatal(err)
	}
	if f.Path != "spec.etcd.type" || f.Type != "string" || f.Default != c.Spec.Etcd.Type || !slices.Contains(f.Allowed, "external") || f.Description == "" {
		t.Errorf("%+v", f)
	}
	ch := s.Choice("spec.etcd.type")
	if len(f.Support) != len(ch.Values) {
		t.Errorf("support %+v, matrix %+v", f.Support, ch.Values)
	}
	// A list is entered with a dot or an index; the default of an
	// element's field is the loader's.
	for _, p := range []string{"spec.hosts.port", "spec.hosts[0].port", "spec.hosts[*].port"} {
		f, err := Explain(p, s)
		if err != nil || f.Path != "spec.hosts[*].port" || f.Type != "integer" || f.Default != "22" {
			t.Errorf("%s: %+v %v", p, f, err)
		}
	}
	// What the minimal file writes is no default.
	if f, err := Explain("spec.hosts.address", s); err != nil || f.Default != "" {
		t.Errorf("spec.hosts.address: %+v %v", f, err)
	}
	if f, err := Explain("spec.registry.auths.myreg.username", s); err != nil || f.Path != "spec.registry.auths[*].username" || f.Type != "string" {
		t.Errorf("a map's key: %+v %v", f, err)
	}
}

func TestExplainObject(t *testing.T) {
	s := support(t)
	f, err := Explain("spec.hosts", s)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range f.Fields {
		names = append(names, c.Name)
	}
	if f.Type != "[]object" || !slices.Contains(names, "address") || !slices.Contains(names, "port") {
		t.Errorf("%+v", f)
	}
	if f, err := Explain("spec", s); err != nil || f.Type != "object" || len(f.Fields) < 10 {
		t.Errorf("spec: %+v %v", f, err)
	}
}

func TestExplainUnknown(t *testing.T) {
	s := support(t)
	for _, tc := range [][2]string{
		{"spec.etcd.tpye", `spec.etcd has no field "tpye"; did you mean "type"?`},
		{"sepc", `cluster.yaml has no field "sepc"; did you mean "spec"?`},
		{"spec..etcd", "is not a field path"},
	} {
		if _, err := Explain(tc[0], s); err == nil || !strings.Contains(err.Error(), tc[1]) {
			t.Errorf("%s: %v", tc[0], err)
		}
	}
}

// Every choice of the support matrix is a field explain finds, under the
// matrix's own path, with the matrix's values.
func TestExplainEveryChoice(t *testing.T) {
	s := support(t)
	for _, ch := range s.Choices {
		f, err := Explain(ch.Field, s)
		if err != nil {
			t.Errorf("%s: %v", ch.Field, err)
			continue
		}
		if f.Path != ch.Field || len(f.Support) != len(ch.Values) {
			t.Errorf("%s: explained as %s with %d values, the matrix has %d", ch.Field, f.Path, len(f.Support), len(ch.Values))
		}
	}
}
