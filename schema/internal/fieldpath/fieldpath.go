// Package fieldpath spells the paths of cluster.yaml's fields
// (spec.hosts[0].address, spec.roleGroupVars["a b"]) alike in decoding,
// which records their positions, and validation, which looks them up.
package fieldpath

import (
	"fmt"
	"strings"
)

// Child is the path of a field of parent.
func Child(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// Index is the path of item i of the list at parent.
func Index(parent string, i int) string { return fmt.Sprintf("%s[%d]", parent, i) }

// Key is the path of the entry k of the mapping at parent: .k, or ["k"]
// when k is not a plain word.
func Key(parent, k string) string {
	if k != "" && strings.IndexFunc(k, func(r rune) bool {
		return !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return Child(parent, k)
	}
	return fmt.Sprintf("%s[%q]", parent, k)
}
