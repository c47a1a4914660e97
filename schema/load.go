package schema

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm/internal/ytree"
)

// Load reads a cluster file and returns it parsed, converted from KubeKey if
// needed, with secrets expanded, defaulted and validated, every choice
// checked against the built-in support matrix.
func Load(path string) (*Cluster, []Warning, error) {
	return LoadWith(path, nil)
}

// LoadWith is Load checking the choices against the support matrix s (a
// fork's; nil is the built-in one).
func LoadWith(path string, s *Support) (*Cluster, []Warning, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read cluster file: %w", err)
	}
	return ParseWith(path, data, s)
}

// Parse is Load for data already read from path (path is used for messages
// and to resolve relative file references).
func Parse(path string, data []byte) (*Cluster, []Warning, error) {
	return ParseWith(path, data, nil)
}

// ParseWith is Parse against the support matrix s (nil: the built-in one).
func ParseWith(path string, data []byte, s *Support) (*Cluster, []Warning, error) {
	return parseWith(path, data, os.LookupEnv, s)
}

func parseWith(path string, data []byte, lookup func(string) (string, bool), s *Support) (*Cluster, []Warning, error) {
	c, decoded, err := decode(path, data)
	if err != nil {
		return nil, nil, err
	}
	return check(c, decoded, lookup, s)
}

// Decoded is a cluster file decoded (and converted from KubeKey), not yet
// expanded, defaulted or validated: what a run reads before it knows the
// support matrix to check the file against (its playbook's, which is
// loaded with the hooks the file names). Check finishes it, so that the
// file is parsed once.
type Decoded struct {
	c  *Cluster
	ps *problems
}

// DecodeFile decodes data, read from path, for Check; an error means there
// was no tree to decode (ParseWith reports it the same way).
func DecodeFile(path string, data []byte) (*Decoded, error) {
	c, ps, err := decode(path, data)
	if err != nil {
		return nil, err
	}
	return &Decoded{c: c, ps: ps}, nil
}

// Cluster is the file as decoded, before Check (its hooks, its name); nil
// when decoding found problems, which Check reports.
func (d *Decoded) Cluster() *Cluster {
	if len(d.ps.list) > 0 {
		return nil
	}
	return d.c
}

// Check is ParseWith for the decoded file: secrets expanded, defaults set,
// everything validated and every choice checked against s (nil: the
// built-in matrix). It changes the decoded cluster: call it once.
func (d *Decoded) Check(s *Support) (*Cluster, []Warning, error) {
	return check(d.c, d.ps, os.LookupEnv, s)
}

// check expands, defaults and validates a decoded cluster c, whose
// decoding found the problems decoded.
func check(c *Cluster, decoded *problems, lookup func(string) (string, bool), s *Support) (*Cluster, []Warning, error) {
	if s == nil {
		var err error
		if s, err = BuiltinSupport(); err != nil {
			return nil, nil, err
		}
	}
	// Validation runs even when decoding found problems, so one run reports
	// everything; its findings under a field that failed to decode are
	// consequences of that failure and are dropped.
	ps := &problems{src: c.src}
	expandSecrets(c, ps, lookup)
	expandRoleGroups(c, ps)
	loadVarsDirs(c, ps)
	SetDefaults(c)
	validate(c, ps)
	s.check(c, ps)
	rv, err := s.RoleVars()
	if err != nil {
		return nil, nil, err
	}
	validateRoleVars(c, rv, false, ps)
	return finish(c, decoded, ps, slices.Clone(decoded.list))
}

// finish adds to what decoding found the problems of ps that are not
// under a path of failed (consequences of those), and returns the result.
func finish(c *Cluster, decoded, ps *problems, failed []Problem) (*Cluster, []Warning, error) {
	for i := range decoded.list {
		decoded.list[i].cause = true
	}
	for _, p := range ps.list {
		if !underAny(p.Path, failed) {
			decoded.list = append(decoded.list, p)
		}
	}
	decoded.warnings = append(decoded.warnings, ps.warnings...)
	if err := decoded.err(); err != nil {
		return nil, decoded.warnings, err
	}
	return c, decoded.warnings, nil
}

func underAny(path string, list []Problem) bool {
	for _, p := range list {
		if path == p.Path || strings.HasPrefix(path, p.Path+".") || strings.HasPrefix(path, p.Path+"[") {
			return true
		}
	}
	return false
}

// Decode parses and type-checks a cluster file and converts a KubeKey v3
// file to the kubexm form, without expanding secrets, applying defaults or
// validating: what `kubexm config convert` writes back.
func Decode(path string, data []byte) (*Cluster, []Warning, error) {
	c, ps, err := decode(path, data)
	if err != nil {
		return nil, nil, err
	}
	if err := ps.err(); err != nil {
		return nil, ps.warnings, err
	}
	return c, ps.warnings, nil
}

// decode returns the cluster as far as it could be decoded, with the
// problems found; err is set only when there is no tree to decode.
func decode(path string, data []byte) (*Cluster, *problems, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	src := &source{file: path, abs: abs, pos: map[string]Pos{}}
	ps := &problems{src: src}
	root, docWarnings, err := parseTree(path, data)
	if err != nil {
		return nil, nil, err
	}
	ps.warnings = append(ps.warnings, docWarnings...)
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
