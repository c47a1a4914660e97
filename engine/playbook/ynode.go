package playbook

import (
	"fmt"

	"github.com/mensylisir/kubexm/internal/ytree"
)

// Pos is a place in a playbook file, for error messages.
type Pos = ytree.Pos

// maxYAMLNodes bounds the size of a document after alias expansion, so a
// "billion laughs" file fails instead of eating the memory.
const maxYAMLNodes = 1_000_000

// ParseYAML parses one YAML document of a file into a node tree. The loader
// works on nodes rather than decoded values so every error can point at a
// line.
func ParseYAML(file string, data []byte) (*ytree.Node, error) {
	return ParseYAMLLimited(file, data, maxYAMLNodes)
}

// ParseYAMLLimited is parseYAML with a bound on the values the document
// expands to (aliases counted in full).
func ParseYAMLLimited(file string, data []byte, maxNodes int) (*ytree.Node, error) {
	docs, err := ytree.Parse(file, data, maxNodes)
	switch {
	case err != nil:
		return nil, err
	case len(docs) > 1:
		return nil, fmt.Errorf("%s: several YAML documents in one file; kubexm reads exactly one", file)
	case len(docs) == 0:
		return &ytree.Node{Pos: Pos{File: file}}, nil
	}
	return docs[0], nil
}
