package schema

import (
	"reflect"

	"github.com/mensylisir/kubexm/schema/internal/jsonschema"
)

//go:generate go run ./internal/gen -o cluster.schema.json

// SchemaID is the $id of cluster.schema.json.
const SchemaID = "https://github.com/mensylisir/kubexm/schema/cluster.schema.json"

// JSONSchema returns the JSON Schema of cluster.yaml, as committed in
// cluster.schema.json.
func JSONSchema() ([]byte, error) {
	return jsonschema.Generate(reflect.TypeFor[Cluster](), SchemaID, "kubexm cluster.yaml",
		map[string]string{"apiVersion": APIVersion, "kind": Kind})
}
