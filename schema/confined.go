package schema

import (
	"maps"
	"regexp"
	"slices"
	"strings"
)

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

// ParseConfined is Parse for a cluster file a client sent to kubexm
// server: it reads nothing of the machine that parses it. A reference to a
// file (passwordFile, privateKeyPath, hook, add-on, etcd and registry
// certificate files, group_vars/ beside the file) or to an environment
// variable is refused at its line, without looking at the file or variable:
// the answer is the same whether it exists or not. Secrets are given in
// the file, or as ${secret:NAME}, a server secret; secret says whether one
// of that name exists for the cluster of that name (nil: none does).
func ParseConfined(data []byte, s *Support, secret func(cluster, name string) bool) (*Cluster, []Warning, error) {
	if s == nil {
		var err error
		if s, err = BuiltinSupport(); err != nil {
			return nil, nil, err
		}
	}
	c, decoded, err := decode("cluster.yaml", data)
	if err != nil {
		return nil, nil, err
	}
	// No file beside it: relative references cannot reach the server's
	// current directory, and no group_vars/ or host_vars/ is read.
	c.src.abs = ""
	cps := &problems{src: c.src}
	refused := confine(c, cps, secret)
	ps := &problems{src: c.src}
	expandRoleGroups(c, ps)
	SetDefaults(c)
	validate(c, ps)
	s.check(c, ps)
	rv, err := s.RoleVars()
	if err != nil {
		return nil, nil, err
	}
	validateRoleVars(c, rv, true, ps)
	// What validation says of a refused field is a consequence of the
	// refusal.
	failed := append(slices.Clone(decoded.list), refusedProblems(refused)...)
	decoded.list = append(decoded.list, cps.list...)
	return finish(c, decoded, ps, failed)
}

func refusedProblems(paths []string) []Problem {
	out := make([]Problem, len(paths))
	for i, p := range paths {
		out[i] = Problem{Path: p}
	}
	return out
}

// secretHint is the same for a secret that does not exist and one scoped
// to other clusters: a cluster file does not learn which.
const secretHint = "kubexm server secret list names the server's secrets and the clusters each is for; kubexm server secret create NAME --cluster CLUSTER makes one"

const confinedHint = "through kubexm server a cluster file names no file or environment variable of the server: give the value itself, or ${secret:NAME} of a secret its administrator made (kubexm server secret create NAME --cluster CLUSTER)"

// confine refuses and clears every reference to the parsing machine's files
// and environment, and returns the paths refused; the first problem at
// each path is the refusal.
func confine(c *Cluster, ps *problems, secret func(cluster, name string) bool) []string {
	var refused []string
	refuse := func(path, what string) {
		ps.add(path, confinedHint, "%s is not allowed through the API", what)
		refused = append(refused, path)
	}
	// secretValue checks a secret field: a value, or a server secret.
	secretValue := func(path string, v *string) {
		if name, ok := SecretRef(*v); ok {
			if secret == nil || !secret(c.Metadata.Name, name) {
				ps.add(path, secretHint, "no server secret %q for cluster %s", name, c.Metadata.Name)
				refused = append(refused, path)
			}
			return
		}
		if strings.HasPrefix(*v, "${") {
			refuse(path, "a ${...} reference")
			*v = ""
		}
	}
	fileRef := func(path string, v *string, what string) {
		if *v != "" {
			refuse(path, what)
			*v = ""
		}
	}
	// keyRef: a private key comes from a server secret only.
	keyRef := func(path string, v *string) {
		if *v == "" {
			return
		}
		if name, ok := SecretRef(*v); ok {
			if secret == nil || !secret(c.Metadata.Name, name) {
				ps.add(path, secretHint, "no server secret %q for cluster %s", name, c.Metadata.Name)
				refused = append(refused, path)
			}
			// Not a file to look for: the worker hands the key to its run.
			*v = ""
			return
		}
		refuse(path, "a private key file")
		*v = ""
	}
	bastion := func(p string, b *Bastion) {
		if b == nil {
			return
		}
		secretValue(child(p, "password"), &b.Password)
		secretValue(child(p, "privateKeyPassphrase"), &b.Passphrase)
		keyRef(child(p, "privateKeyPath"), &b.PrivateKeyPath)
	}
	for i := range c.Spec.Hosts {
		h := &c.Spec.Hosts[i]
		p := index("spec.hosts", i)
		if h.PasswordFile != "" {
			fileRef(child(p, "passwordFile"), &h.PasswordFile, "a password file")
		}
		secretValue(child(p, "password"), &h.Password)
		secretValue(child(p, "privateKeyPassphrase"), &h.Passphrase)
		secretValue(child(p, "sudoPassword"), &h.SudoPassword)
		keyRef(child(p, "privateKeyPath"), &h.PrivateKeyPath)
		bastion(child(p, "bastion"), h.Bastion)
	}
	bastion("spec.bastion", c.Spec.Bastion)
	for _, name := range slices.Sorted(maps.Keys(c.Spec.Registry.Auths)) {
		a := c.Spec.Registry.Auths[name]
		p := key("spec.registry.auths", name)
		fileRef(child(p, "passwordFile"), &a.PasswordFile, "a password file")
		fileRef(child(p, "certsPath"), &a.CertsPath, "a certificate directory")
		secretValue(child(p, "password"), &a.Password)
		c.Spec.Registry.Auths[name] = a
	}
	if len(c.Spec.Hooks) > 0 {
		// A hook is a playbook file of the control machine: through the
		// server the plays go in a playbook of its --playbooks directory.
		refuse("spec.hooks", "a hook (a playbook file of the server; put its plays in a playbook of the server's --playbooks directory and queue that)")
		c.Spec.Hooks = nil
	}
	for i := range c.Spec.Addons {
		a := &c.Spec.Addons[i]
		if a.Sources == nil {
			continue
		}
		p := child(index("spec.addons", i), "sources")
		// Cleared in copies: the caller's Addons share Sources.
		if y := a.Sources.Yaml; y != nil && len(y.Path) > 0 {
			refuse(child(p, "yaml"), "an add-on's manifest files")
			src := *a.Sources
			src.Yaml = &AddonYaml{}
			a.Sources = &src
		}
		if ch := a.Sources.Chart; ch != nil && (ch.Path != "" || ch.ValuesFile != "") {
			refuse(child(p, "chart"), "an add-on's chart and values files")
			src, cc := *a.Sources, *ch
			cc.Path, cc.ValuesFile = "", ""
			src.Chart = &cc
			a.Sources = &src
		}
	}
	if x := c.Spec.Etcd.External; x != nil {
		fileRef("spec.etcd.external.caFile", &x.CAFile, "a certificate file")
		fileRef("spec.etcd.external.certFile", &x.CertFile, "a certificate file")
		fileRef("spec.etcd.external.keyFile", &x.KeyFile, "a key file")
	}
	return refused
}
