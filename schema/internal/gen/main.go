// Command gen writes cluster.schema.json from the schema package's types.
// It runs through `go generate ./schema`.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/mensylisir/kubexm/schema"
)

func main() {
	out := flag.String("o", "cluster.schema.json", "output file")
	flag.Parse()
	data, err := schema.JSONSchema()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, data, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
