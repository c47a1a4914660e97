package schema

import (
	"reflect"
	"strings"

	"github.com/mensylisir/kubexm/schema/internal/jsonschema"
)

//go:generate go run ./internal/gen -o cluster.schema.json

// SchemaID is the $id of cluster.schema.json.
const SchemaID = "https://github.com/mensylisir/kubexm/schema/cluster.schema.json"

// JSONSchema returns the JSON Schema of cluster.yaml, as committed in
// cluster.schema.json. What a field's description says of support comes
// from the built-in support matrix (roles/support.yaml), not from the doc
// tags, so the two cannot disagree.
func JSONSchema() ([]byte, error) {
	s, err := BuiltinSupport()
	if err != nil {
		return nil, err
	}
	return jsonschema.Generate(reflect.TypeFor[Cluster](), SchemaID, "kubexm cluster.yaml",
		map[string]string{"apiVersion": APIVersion, "kind": Kind}, s.describe)
}

// describe adds to a field's doc what the matrix does not support of it.
func (s *Support) describe(path, doc string) string {
	c := s.Choice(path)
	if c == nil {
		return doc
	}
	var values []string
	for _, v := range c.NotSupported() {
		switch v {
		case valueSet:
			return strings.TrimSpace(doc + " Setting it is not supported yet (kubexm support).")
		case valueUnset, valueOther:
			continue
		}
		values = append(values, v)
	}
	if len(values) == 0 {
		return doc
	}
	return strings.TrimSpace(doc + " Not supported yet (kubexm support): " + strings.Join(values, ", ") + ".")
}
