package schema

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Mask replaces every secret in Masked output.
const Mask = "******"

// expandSecrets resolves `${ENV}` passwords and passwordFile references in
// place. lookup is os.LookupEnv outside tests.
func expandSecrets(c *Cluster, ps *problems, lookup func(string) (string, bool)) {
	for i := range c.Spec.Hosts {
		h := &c.Spec.Hosts[i]
		p := index("spec.hosts", i)
		resolveSecret(c, ps, lookup, &h.Password, h.PasswordFile, child(p, "password"), child(p, "passwordFile"))
		resolveSecret(c, ps, lookup, &h.Passphrase, "", child(p, "privateKeyPassphrase"), "")
		resolveSecret(c, ps, lookup, &h.SudoPassword, "", child(p, "sudoPassword"), "")
		if h.Bastion != nil {
			resolveSecret(c, ps, lookup, &h.Bastion.Password, "", child(child(p, "bastion"), "password"), "")
			resolveSecret(c, ps, lookup, &h.Bastion.Passphrase, "", child(child(p, "bastion"), "privateKeyPassphrase"), "")
		}
	}
	if c.Spec.Bastion != nil {
		resolveSecret(c, ps, lookup, &c.Spec.Bastion.Password, "", "spec.bastion.password", "")
		resolveSecret(c, ps, lookup, &c.Spec.Bastion.Passphrase, "", "spec.bastion.privateKeyPassphrase", "")
	}
	for name, a := range c.Spec.Registry.Auths {
		p := key("spec.registry.auths", name)
		resolveSecret(c, ps, lookup, &a.Password, a.PasswordFile, child(p, "password"), child(p, "passwordFile"))
		c.Spec.Registry.Auths[name] = a
	}
}

func resolveSecret(c *Cluster, ps *problems, lookup func(string) (string, bool), pw *string, file, pwPath, filePath string) {
	if file != "" {
		if *pw != "" {
			ps.add(pwPath, "keep one of them", "password and passwordFile are both set")
			return
		}
		data, err := os.ReadFile(c.resolvePath(file))
		if err != nil {
			ps.add(filePath, "the path is relative to the cluster file", "cannot read password file: %v", err)
			return
		}
		*pw = strings.TrimRight(string(data), "\r\n")
		return
	}
	v := *pw
	if !strings.HasPrefix(v, "${") || !strings.HasSuffix(v, "}") {
		return
	}
	name := v[2 : len(v)-1]
	if !validEnvName(name) {
		// Not echoed: the value of a secret field may be the secret itself.
		ps.add(pwPath, "write ${NAME} with letters, digits and _", "not a valid environment variable reference")
		return
	}
	val, ok := lookup(name)
	if !ok {
		ps.add(pwPath, "export "+name+" before running kubexm, or use passwordFile", "environment variable %s is not set", name)
		return
	}
	*pw = val
}

func validEnvName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// resolvePath makes a file reference from cluster.yaml absolute: ~ is the
// user's home and relative paths are relative to the cluster file.
func (c *Cluster) resolvePath(p string) string {
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
		return c.resolvePath(p)
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
			if k, val, ok := strings.Cut(fmt.Sprint(e), "="); ok && val != "" && secretVarName.MatchString(k[strings.LastIndex(k, ".")+1:]) {
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
