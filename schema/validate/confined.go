package validate

import (
	"github.com/mensylisir/kubexm/schema"
	"github.com/mensylisir/kubexm/schema/matrix"

	"maps"
	"slices"
	"strings"

	"github.com/mensylisir/kubexm/schema/internal/fieldpath"
)

// ParseConfined is Parse for a cluster file a client sent to kubexm
// server: it reads nothing of the machine that parses it. A reference to a
// file (passwordFile, privateKeyPath, hook, add-on, etcd and registry
// certificate files, group_vars/ beside the file) or to an environment
// variable is refused at its line, without looking at the file or variable:
// the answer is the same whether it exists or not. Secrets are given in
// the file, or as ${secret:NAME}, a server secret; secret says whether one
// of that name exists for the cluster of that name (nil: none does).
func ParseConfined(data []byte, s *matrix.Support, secret func(cluster, name string) bool) (*schema.Cluster, []schema.Warning, error) {
	s, err := orBuiltin(s)
	if err != nil {
		return nil, nil, err
	}
	c, decoded, err := schema.DecodeProblems("cluster.yaml", data)
	if err != nil {
		return nil, nil, err
	}
	// No file beside it: relative references cannot reach the server's
	// current directory, and no group_vars/ or host_vars/ is read.
	c.DetachFile()
	cps := c.NewProblems()
	refused := confine(c, cps, secret)
	ps := c.NewProblems()
	expandRoleGroups(c, ps)
	if err := defaultAndValidate(c, s, true, ps); err != nil {
		return nil, nil, err
	}
	// What validation says of a refused field is a consequence of the
	// refusal.
	failed := append(slices.Clone(decoded.List), refusedProblems(refused)...)
	decoded.List = append(decoded.List, cps.List...)
	return finish(c, decoded, ps, failed)
}

func refusedProblems(paths []string) []schema.Problem {
	out := make([]schema.Problem, len(paths))
	for i, p := range paths {
		out[i] = schema.Problem{Path: p}
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
func confine(c *schema.Cluster, ps *schema.Problems, secret func(cluster, name string) bool) []string {
	var refused []string
	refuse := func(path, what string) {
		ps.Add(path, confinedHint, "%s is not allowed through the API", what)
		refused = append(refused, path)
	}
	// secretValue checks a secret field: a value, or a server secret.
	secretValue := func(path string, v *string) {
		if name, ok := schema.SecretRef(*v); ok {
			if secret == nil || !secret(c.Metadata.Name, name) {
				ps.Add(path, secretHint, "no server secret %q for cluster %s", name, c.Metadata.Name)
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
		if name, ok := schema.SecretRef(*v); ok {
			if secret == nil || !secret(c.Metadata.Name, name) {
				ps.Add(path, secretHint, "no server secret %q for cluster %s", name, c.Metadata.Name)
				refused = append(refused, path)
			}
			// Not a file to look for: the worker hands the key to its run.
			*v = ""
			return
		}
		refuse(path, "a private key file")
		*v = ""
	}
	bastion := func(p string, b *schema.Bastion) {
		if b == nil {
			return
		}
		secretValue(fieldpath.Child(p, "password"), &b.Password)
		secretValue(fieldpath.Child(p, "privateKeyPassphrase"), &b.Passphrase)
		keyRef(fieldpath.Child(p, "privateKeyPath"), &b.PrivateKeyPath)
	}
	for i := range c.Spec.Hosts {
		h := &c.Spec.Hosts[i]
		p := fieldpath.Index("spec.hosts", i)
		if h.PasswordFile != "" {
			fileRef(fieldpath.Child(p, "passwordFile"), &h.PasswordFile, "a password file")
		}
		secretValue(fieldpath.Child(p, "password"), &h.Password)
		secretValue(fieldpath.Child(p, "privateKeyPassphrase"), &h.Passphrase)
		secretValue(fieldpath.Child(p, "sudoPassword"), &h.SudoPassword)
		keyRef(fieldpath.Child(p, "privateKeyPath"), &h.PrivateKeyPath)
		bastion(fieldpath.Child(p, "bastion"), h.Bastion)
	}
	bastion("spec.bastion", c.Spec.Bastion)
	for _, name := range slices.Sorted(maps.Keys(c.Spec.Registry.Auths)) {
		a := c.Spec.Registry.Auths[name]
		p := fieldpath.Key("spec.registry.auths", name)
		fileRef(fieldpath.Child(p, "passwordFile"), &a.PasswordFile, "a password file")
		fileRef(fieldpath.Child(p, "certsPath"), &a.CertsPath, "a certificate directory")
		secretValue(fieldpath.Child(p, "password"), &a.Password)
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
		p := fieldpath.Child(fieldpath.Index("spec.addons", i), "sources")
		// Cleared in copies: the caller's Addons share Sources.
		if y := a.Sources.Yaml; y != nil && len(y.Path) > 0 {
			refuse(fieldpath.Child(p, "yaml"), "an add-on's manifest files")
			src := *a.Sources
			src.Yaml = &schema.AddonYaml{}
			a.Sources = &src
		}
		if ch := a.Sources.Chart; ch != nil && (ch.Path != "" || ch.ValuesFile != "") {
			refuse(fieldpath.Child(p, "chart"), "an add-on's chart and values files")
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
