package schema

// cluster.schema.json is generated from these types by schema/schemas
// (JSONSchema), as the Cluster resource's CRD is (crd.go).
//go:generate go run ./internal/gen -o cluster.schema.json
