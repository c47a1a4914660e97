package schema

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/mensylisir/kubexm/schema/internal/valid"
)

// Mask replaces every secret in Masked output.
const Mask = "******"

// ResolvePath makes a file reference from cluster.yaml absolute: ~ is the
// user's home and relative paths are relative to the cluster file.
func (c *Cluster) ResolvePath(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[1:])
		}
		return p
	}
	if filepath.IsAbs(p) || c.src == nil || c.src.abs == "" {
		return p
	}
	return filepath.Join(filepath.Dir(c.src.abs), p)
}

// RegistryCertsDir is registry.auths[name].certsPath as a path on this
// machine (relative to the cluster file), "" when it is not set.
func (c *Cluster) RegistryCertsDir(name string) string {
	if p := c.Spec.Registry.Auths[name].CertsPath; p != "" {
		return c.ResolvePath(p)
	}
	return ""
}

// Masked returns a copy of the cluster with every password replaced by
// Mask, for printing.
func (c *Cluster) Masked() *Cluster {
	m := *c
	m.Spec.Hosts = slices.Clone(c.Spec.Hosts)
	for i := range m.Spec.Hosts {
		h := &m.Spec.Hosts[i]
		maskString(&h.Password)
		maskString(&h.Passphrase)
		maskString(&h.SudoPassword)
		h.Bastion = maskedBastion(h.Bastion)
		h.Vars = maskVars(h.Vars)
	}
	m.Spec.Bastion = maskedBastion(c.Spec.Bastion)
	if c.Spec.RoleGroupVars != nil {
		m.Spec.RoleGroupVars = make(map[string]VarMap, len(c.Spec.RoleGroupVars))
		for g, vars := range c.Spec.RoleGroupVars {
			m.Spec.RoleGroupVars[g] = maskVars(vars)
		}
	}
	m.Spec.Addons = slices.Clone(c.Spec.Addons)
	for i, a := range m.Spec.Addons {
		if a.Sources == nil || a.Sources.Chart == nil || a.Sources.Chart.Values == nil {
			continue
		}
		src, ch := *a.Sources, *a.Sources.Chart
		ch.Values = maskChartValues(ch.Values)
		src.Chart = &ch
		m.Spec.Addons[i].Sources = &src
	}
	// A map of secrets by the schema (harbor.yml's values): every value
	// masked, whatever its key.
	if c.Spec.Registry.HarborConfig != nil {
		m.Spec.Registry.HarborConfig = map[string]any(maskAll(VarMap(c.Spec.Registry.HarborConfig)))
	}
	if c.Spec.Registry.Auths != nil {
		m.Spec.Registry.Auths = maps.Clone(c.Spec.Registry.Auths)
		for k, a := range m.Spec.Registry.Auths {
			maskString(&a.Password)
			m.Spec.Registry.Auths[k] = a
		}
	}
	return &m
}

// maskChartValues masks a chart's values under secret-named keys: in a
// mapping as variables are, in KubeKey's key=value entries by the last
// segment of the key.
func maskChartValues(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return map[string]any(maskVars(VarMap(x)))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
			if k, val, ok := strings.Cut(fmt.Sprint(e), "="); ok && val != "" && valid.SecretVarName.MatchString(k[strings.LastIndex(k, ".")+1:]) {
				out[i] = k + "=" + Mask
			}
		}
		return out
	}
	return v
}

func maskString(p *string) {
	if *p != "" {
		*p = Mask
	}
}

func maskedBastion(b *Bastion) *Bastion {
	if b == nil {
		return nil
	}
	m := *b
	maskString(&m.Password)
	maskString(&m.Passphrase)
	return &m
}

// SecretRefRE is a reference to a secret the server's administrator
// created (kubexm server secret create NAME): ${secret:NAME}. Not an
// environment variable reference (a name holds no ':'), so no existing
// cluster file changes meaning.
var SecretRefRE = regexp.MustCompile(`^\$\{secret:([a-z0-9][a-z0-9._-]{0,62})\}$`)

// SecretRef returns the name of the server secret v refers to.
func SecretRef(v string) (string, bool) {
	m := SecretRefRE.FindStringSubmatch(v)
	if m == nil {
		return "", false
	}
	return m[1], true
}
