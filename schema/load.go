package schema

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm/internal/ytree"
)

// Decode parses and type-checks a cluster file and converts a KubeKey v3
// file to the kubexm form, without expanding secrets, applying defaults or
// validating: what `kubexm config convert` writes back.
func Decode(path string, data []byte) (*Cluster, []Warning, error) {
	c, ps, err := decode(path, data)
	if err != nil {
		return nil, nil, err
	}
	if err := ps.Err(); err != nil {
		return nil, ps.Warnings, err
	}
	return c, ps.Warnings, nil
}

// ConvertFile reads the cluster file file and returns it in the kubexm
// form (Decode, then Marshal), with the warnings of its decoding.
func ConvertFile(file string) ([]byte, []Warning, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, fmt.Errorf("read cluster file: %w", err)
	}
	c, warnings, err := Decode(file, data)
	if err != nil {
		return nil, warnings, err
	}
	out, err := Marshal(c)
	return out, warnings, err
}

// DecodeProblems returns the cluster as far as it could be decoded, with
// the problems found, for validation (schema/validate) to finish; err is
// set only when there is no tree to decode.
func DecodeProblems(path string, data []byte) (*Cluster, *Problems, error) {
	return decode(path, data)
}

// decode is DecodeProblems.
func decode(path string, data []byte) (*Cluster, *Problems, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	src := &source{file: path, abs: abs, pos: map[string]Pos{}}
	ps := &Problems{src: src}
	root, docWarnings, err := parseTree(path, data)
	if err != nil {
		return nil, nil, err
	}
	ps.Warnings = append(ps.Warnings, docWarnings...)
	if root.Kind != ytree.Map {
		return nil, nil, &Error{Problems: []Problem{{Pos: root.TokPos, Message: "a cluster file is a mapping with apiVersion, kind, metadata and spec"}}}
	}
	if other := otherKubeKeyFormat(root); other != "" {
		return nil, nil, &Error{Problems: []Problem{{Pos: root.Get("apiVersion").TokPos, Path: "apiVersion", Message: "this is " + other}}}
	}
	if scalarAt(root, "apiVersion") == KubeKeyAPIVersion {
		convertKubeKey(root, ps)
	}
	c := &Cluster{src: src}
	d := &decoder{ps: ps}
	d.decode(root, reflect.ValueOf(c).Elem(), "")
	return c, ps, nil
}

// Marshal writes a cluster as YAML in the file's own key names.
func Marshal(c *Cluster) ([]byte, error) {
	out, err := yaml.MarshalWithOptions(c, yaml.IndentSequence(true))
	if err != nil {
		return nil, fmt.Errorf("marshal cluster: %w", err)
	}
	return out, nil
}

// File returns the absolute path of the file the cluster was read from, or
// "" for a cluster built in code.
func (c *Cluster) File() string {
	if c.src == nil {
		return ""
	}
	return c.src.abs
}

// PosOf returns where a field path (e.g. "spec.hosts[1].address") was
// written, for messages about the cluster after loading.
func (c *Cluster) PosOf(path string) Pos {
	return c.src.posOf(path)
}

// DetachFile keeps the cluster's positions for messages but forgets the
// directory it was read from: no relative reference resolves beside it
// and no group_vars/ is read (a file a client sent to kubexm server).
func (c *Cluster) DetachFile() {
	if c.src != nil {
		c.src.abs = ""
	}
}
