// Package inventory is the machines a run targets: hosts with their
// connection settings and variables, and named groups of them. It is where
// the configuration meets the engine: schema builds it from cluster.yaml
// (and this package from an Ansible-style inventory), the engine runs plays
// on it; it imports neither.
package inventory

// Localhost is the name of the control machine, the one running kubexm. It is
// always addressable in a play's hosts and in delegate_to, whether or not the
// inventory lists it.
const Localhost = "localhost"

// Host is one machine.
type Host struct {
	Name string
	// Connection settings. Local hosts are reached without SSH.
	Local          bool
	Address        string
	Port           int
	User           string
	Password       string // secret: never printed or journaled
	PrivateKeyPath string
	Passphrase     string // secret
	BecomePassword string // secret; defaults to Password for sudo
	Bastion        *Bastion
	// CredentialsHint says where this host's credentials are set, in the
	// words of the file it came from, for "no credentials" errors.
	CredentialsHint string
	// Vars are the host's own variables (labels, arch, internal address...).
	Vars map[string]any
}

// Bastion is a jump host through which a host is reached.
type Bastion struct {
	Address        string
	Port           int
	User           string
	Password       string // secret
	PrivateKeyPath string
	Passphrase     string // secret: of an encrypted PrivateKeyPath
}

// Inventory is all hosts and groups of a run.
type Inventory struct {
	Hosts []Host // in declaration order
	// Groups maps a group name to its members, in declaration order.
	Groups map[string][]string
	// GroupVars maps a group name to variables for its members.
	GroupVars map[string]map[string]any
	// Vars are inventory-wide variables (the cluster spec).
	Vars map[string]any
	// OtherSecrets are secret values that are not connection settings
	// (registry passwords in the spec), masked like the hosts' passwords.
	OtherSecrets []string
	// Cluster says the inventory was built from a cluster.yaml, so the
	// cluster's variables (spec, ...) exist; playbooks that declare
	// `inventory: cluster` need it.
	Cluster bool
	// Source names where the inventory came from (a file path), for messages
	// and to tie a run journal to its inventory.
	Source string
}

// Host returns the named host.
func (inv *Inventory) Host(name string) (*Host, bool) {
	for i := range inv.Hosts {
		if inv.Hosts[i].Name == name {
			return &inv.Hosts[i], true
		}
	}
	return nil, false
}

// Secrets lists every secret value in the inventory, so output and journals
// can mask them.
func (inv *Inventory) Secrets() []string {
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, h := range inv.Hosts {
		add(h.Password)
		add(h.Passphrase)
		add(h.BecomePassword)
		if h.Bastion != nil {
			add(h.Bastion.Password)
			add(h.Bastion.Passphrase)
		}
	}
	for _, s := range inv.OtherSecrets {
		add(s)
	}
	return out
}
