package schema

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
)

// operatorKey is the private key the in-cluster controller (spec.operator)
// reaches every remote host and bastion with: the one key they all use, as
// Inventory resolves it. The controller's credentials Secret holds one key
// and nothing else, so a host reached otherwise (a password, a sudo
// password, an encrypted key, another key) is a problem named by its field.
func (c *Cluster) operatorKey() (key, path, problem string) {
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
		p := index("spec.hosts", i)
		if h.Connection == "local" || h.Connection == "" && isLocalAddress(h.Address) {
			continue
		}
		switch {
		case h.Password != "" || h.PasswordFile != "":
			return "", child(p, "password"), "reached with a password"
		case h.SudoPassword != "":
			return "", child(p, "sudoPassword"), "needs a sudo password"
		case h.Passphrase != "":
			return "", child(p, "privateKeyPassphrase"), "reached with an encrypted key"
		}
		k := defaultKey
		if h.PrivateKeyPath != "" {
			k = c.resolvePath(h.PrivateKeyPath)
		}
		if !use(child(p, "privateKeyPath"), k) {
			return "", path, problem
		}
		if b := cmp.Or(h.Bastion, c.Spec.Bastion); b != nil {
			bp := child(p, "bastion")
			if h.Bastion == nil {
				bp = "spec.bastion"
			}
			if b.Password != "" || b.Passphrase != "" {
				return "", bp, "the bastion is reached with a password or an encrypted key"
			}
			if b.PrivateKeyPath != "" && !use(child(bp, "privateKeyPath"), c.resolvePath(b.PrivateKeyPath)) {
				return "", path, problem
			}
		}
	}
	return key, "", ""
}

// validateOperator refuses spec.operator.enabled for a cluster whose hosts
// the controller could not reach with its Secret's one key.
func validateOperator(c *Cluster, ps *problems) {
	if !c.Spec.Operator.Enabled {
		return
	}
	if _, path, problem := c.operatorKey(); problem != "" {
		ps.add(path, "spec.operator.enabled gives the controller in the cluster one SSH private key (a Secret) for every host: "+
			"reach every remote host and bastion with the same privateKeyPath, unencrypted, without password or sudoPassword; "+
			"or leave spec.operator.enabled false and run kubexm controller on the control machine (docs/guide.md, operator mode)",
			"spec.operator.enabled: %s", problem)
	}
}
