package schema

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mensylisir/kubexm/schema/internal/fieldpath"
	"github.com/mensylisir/kubexm/schema/internal/valid"
)

// OperatorKey is the private key the in-cluster controller (spec.operator)
// reaches every remote host and bastion with: the one key they all use, as
// Inventory resolves it. The controller's credentials Secret holds one key
// and nothing else, so a host reached otherwise (a password, a sudo
// password, an encrypted key, another key) is a problem named by its field.
func (c *Cluster) OperatorKey() (key, path, problem string) {
	defaultKey := ""
	if home, err := os.UserHomeDir(); err == nil {
		if p := filepath.Join(home, ".ssh", "id_rsa"); fileExists(p) {
			defaultKey = p
		}
	}
	use := func(p, k string) bool {
		switch {
		case k == "":
			path, problem = p, "reached with no private key"
		case key == "":
			key = k
			return true
		case k != key:
			path, problem = p, fmt.Sprintf("reached with the key %s, another host with %s: the controller has one key for every host", k, key)
		default:
			return true
		}
		return false
	}
	for i, h := range c.Spec.Hosts {
		p := fieldpath.Index("spec.hosts", i)
		if h.Connection == "local" || h.Connection == "" && valid.IsLocalAddress(h.Address) {
			continue
		}
		switch {
		case h.Password != "" || h.PasswordFile != "":
			return "", fieldpath.Child(p, "password"), "reached with a password"
		case h.SudoPassword != "":
			return "", fieldpath.Child(p, "sudoPassword"), "needs a sudo password"
		case h.Passphrase != "":
			return "", fieldpath.Child(p, "privateKeyPassphrase"), "reached with an encrypted key"
		}
		k := defaultKey
		if h.PrivateKeyPath != "" {
			k = c.ResolvePath(h.PrivateKeyPath)
		}
		if !use(fieldpath.Child(p, "privateKeyPath"), k) {
			return "", path, problem
		}
		if b := cmp.Or(h.Bastion, c.Spec.Bastion); b != nil {
			bp := fieldpath.Child(p, "bastion")
			if h.Bastion == nil {
				bp = "spec.bastion"
			}
			if b.Password != "" || b.Passphrase != "" {
				return "", bp, "the bastion is reached with a password or an encrypted key"
			}
			if b.PrivateKeyPath != "" && !use(fieldpath.Child(bp, "privateKeyPath"), c.ResolvePath(b.PrivateKeyPath)) {
				return "", path, problem
			}
		}
	}
	return key, "", ""
}
