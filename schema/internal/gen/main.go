// Command gen writes cluster.schema.json, or with -crd the Cluster
// resource's CustomResourceDefinition, from the schema package's types. It
// runs through `go generate ./schema`.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/mensylisir/kubexm/schema/schemas"
)

func main() {
	out := flag.String("o", "cluster.schema.json", "where the JSON Schema goes")
	crd := flag.String("crd", "", "write the CustomResourceDefinition to this file instead")
	flag.Parse()
	gen, path := schemas.JSONSchema, *out
	if *crd != "" {
		gen, path = schemas.CRD, *crd
	}
	data, err := gen()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
