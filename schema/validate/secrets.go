package validate

import (
	"github.com/mensylisir/kubexm/schema"

	"os"
	"strings"

	"github.com/mensylisir/kubexm/schema/internal/fieldpath"
)

// expandSecrets resolves `${ENV}` passwords and passwordFile references in
// place. lookup is os.LookupEnv outside tests.
func expandSecrets(c *schema.Cluster, ps *schema.Problems, lookup func(string) (string, bool)) {
	for i := range c.Spec.Hosts {
		h := &c.Spec.Hosts[i]
		p := fieldpath.Index("spec.hosts", i)
		resolveSecret(c, ps, lookup, &h.Password, h.PasswordFile, fieldpath.Child(p, "password"), fieldpath.Child(p, "passwordFile"))
		resolveSecret(c, ps, lookup, &h.Passphrase, "", fieldpath.Child(p, "privateKeyPassphrase"), "")
		resolveSecret(c, ps, lookup, &h.SudoPassword, "", fieldpath.Child(p, "sudoPassword"), "")
		if h.Bastion != nil {
			resolveSecret(c, ps, lookup, &h.Bastion.Password, "", fieldpath.Child(fieldpath.Child(p, "bastion"), "password"), "")
			resolveSecret(c, ps, lookup, &h.Bastion.Passphrase, "", fieldpath.Child(fieldpath.Child(p, "bastion"), "privateKeyPassphrase"), "")
		}
	}
	if c.Spec.Bastion != nil {
		resolveSecret(c, ps, lookup, &c.Spec.Bastion.Password, "", "spec.bastion.password", "")
		resolveSecret(c, ps, lookup, &c.Spec.Bastion.Passphrase, "", "spec.bastion.privateKeyPassphrase", "")
	}
	for name, a := range c.Spec.Registry.Auths {
		p := fieldpath.Key("spec.registry.auths", name)
		resolveSecret(c, ps, lookup, &a.Password, a.PasswordFile, fieldpath.Child(p, "password"), fieldpath.Child(p, "passwordFile"))
		c.Spec.Registry.Auths[name] = a
	}
}

func resolveSecret(c *schema.Cluster, ps *schema.Problems, lookup func(string) (string, bool), pw *string, file, pwPath, filePath string) {
	if file != "" {
		if *pw != "" {
			ps.Add(pwPath, "keep one of them", "password and passwordFile are both set")
			return
		}
		data, err := os.ReadFile(c.ResolvePath(file))
		if err != nil {
			ps.Add(filePath, "the path is relative to the cluster file", "cannot read password file: %v", err)
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
		ps.Add(pwPath, "write ${NAME} with letters, digits and _", "not a valid environment variable reference")
		return
	}
	val, ok := lookup(name)
	if !ok {
		ps.Add(pwPath, "export "+name+" before running kubexm, or use passwordFile", "environment variable %s is not set", name)
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
