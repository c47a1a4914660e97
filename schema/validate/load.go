package validate

import (
	"github.com/mensylisir/kubexm/schema"
	"github.com/mensylisir/kubexm/schema/matrix"

	"fmt"
	"os"
	"slices"
)

// Load reads a cluster file and returns it parsed, converted from KubeKey if
// needed, with secrets expanded, defaulted and validated, every choice
// checked against the built-in support matrix.
func Load(path string) (*schema.Cluster, []schema.Warning, error) {
	return LoadWith(path, nil)
}

// LoadWith is Load checking the choices against the support matrix s (a
// fork's; nil is the built-in one).
func LoadWith(path string, s *matrix.Support) (*schema.Cluster, []schema.Warning, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read cluster file: %w", err)
	}
	return ParseWith(path, data, s)
}

// Parse is Load for data already read from path (path is used for messages
// and to resolve relative file references).
func Parse(path string, data []byte) (*schema.Cluster, []schema.Warning, error) {
	return ParseWith(path, data, nil)
}

// ParseWith is Parse against the support matrix s (nil: the built-in one).
func ParseWith(path string, data []byte, s *matrix.Support) (*schema.Cluster, []schema.Warning, error) {
	return parseWith(path, data, os.LookupEnv, s)
}

func parseWith(path string, data []byte, lookup func(string) (string, bool), s *matrix.Support) (*schema.Cluster, []schema.Warning, error) {
	c, decoded, err := schema.DecodeProblems(path, data)
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
	c  *schema.Cluster
	ps *schema.Problems
}

// DecodeFile decodes data, read from path, for Check; an error means there
// was no tree to decode (ParseWith reports it the same way).
func DecodeFile(path string, data []byte) (*Decoded, error) {
	c, ps, err := schema.DecodeProblems(path, data)
	if err != nil {
		return nil, err
	}
	return &Decoded{c: c, ps: ps}, nil
}

// Cluster is the file as decoded, before Check (its hooks, its name); nil
// when decoding found problems, which Check reports.
func (d *Decoded) Cluster() *schema.Cluster {
	if len(d.ps.List) > 0 {
		return nil
	}
	return d.c
}

// Check is ParseWith for the decoded file: secrets expanded, defaults set,
// everything validated and every choice checked against s (nil: the
// built-in matrix). It changes the decoded cluster: call it once.
func (d *Decoded) Check(s *matrix.Support) (*schema.Cluster, []schema.Warning, error) {
	return check(d.c, d.ps, os.LookupEnv, s)
}

// check expands, defaults and validates a decoded cluster c, whose
// decoding found the problems decoded.
func check(c *schema.Cluster, decoded *schema.Problems, lookup func(string) (string, bool), s *matrix.Support) (*schema.Cluster, []schema.Warning, error) {
	s, err := orBuiltin(s)
	if err != nil {
		return nil, nil, err
	}
	// Validation runs even when decoding found problems, so one run reports
	// everything; its findings under a field that failed to decode are
	// consequences of that failure and are dropped.
	ps := c.NewProblems()
	expandSecrets(c, ps, lookup)
	expandRoleGroups(c, ps)
	schema.LoadVarsDirs(c, ps)
	if err := defaultAndValidate(c, s, false, ps); err != nil {
		return nil, nil, err
	}
	return finish(c, decoded, ps, slices.Clone(decoded.List))
}

// orBuiltin is s, or the built-in support matrix when s is nil.
func orBuiltin(s *matrix.Support) (*matrix.Support, error) {
	if s != nil {
		return s, nil
	}
	return matrix.BuiltinSupport()
}

// defaultAndValidate applies the defaults to an expanded cluster and adds
// to ps what validation, the support matrix and the role variables'
// declarations find (confined: the file came to kubexm server, whose
// machine is the control machine).
func defaultAndValidate(c *schema.Cluster, s *matrix.Support, confined bool, ps *schema.Problems) error {
	schema.SetDefaults(c)
	validate(c, ps)
	checkSupport(s, c, ps)
	rv, err := s.RoleVars()
	if err != nil {
		return err
	}
	validateRoleVars(c, rv, confined, ps)
	return nil
}

// finish adds to what decoding found the problems of ps that are not
// under a path of failed (consequences of those), and returns the result.
func finish(c *schema.Cluster, decoded, ps *schema.Problems, failed []schema.Problem) (*schema.Cluster, []schema.Warning, error) {
	warnings, err := decoded.Finish(ps, failed)
	if err != nil {
		return nil, warnings, err
	}
	return c, warnings, nil
}
