package schema

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/schema/hostrange"
	"github.com/mensylisir/kubexm/schema/internal/valid"
)

// Inventory builds the engine's inventory from a loaded cluster: hosts with
// connection settings and variables, role groups, and the whole spec as
// variables. source names the inventory in messages and journals; "" uses
// the cluster file's path.
func Inventory(c *Cluster, source string) (*inventory.Inventory, error) {
	groups, err := c.groups()
	if err != nil {
		return nil, err
	}
	if source == "" {
		source = c.File()
	}
	resource, err := c.ResourceYAML()
	if err != nil {
		return nil, err
	}
	inv := &inventory.Inventory{
		Groups:    groups,
		GroupVars: map[string]map[string]any{},
		Source:    source,
		Cluster:   true,
		// Roles need the registry credentials, so they stay in the spec
		// variables; listing them here keeps them out of output and journals.
		OtherSecrets: append(registryPasswords(c), varSecrets(c)...),
		Vars: map[string]any{
			"cluster_name": c.Metadata.Name,
			"cluster_file": c.File(),
			"spec":         c.specVars(),
			// The Cluster resource (YAML) that roles/cluster-resource applies
			// to the API server: secrets left out.
			"cluster_resource": string(resource),
			// The key roles/kubexm-controller puts in the controller's
			// Secret (spec.operator.enabled): a path on the control
			// machine, not the key.
			"kubexm_controller_ssh_key_file": operatorKeyVar(c),
			// Below every host's own arch: what localhost, which cluster.yaml
			// does not list, runs with.
			"arch": DefaultArch,
		},
	}
	// The site's variables from cluster.yaml, group_vars/ and host_vars/
	// sit at Ansible's inventory levels: all, then each group, then the
	// host (validation keeps them off the names set above).
	maps.Copy(inv.Vars, c.Spec.RoleGroupVars["all"])
	for g, vars := range c.Spec.RoleGroupVars {
		if g != "all" {
			inv.GroupVars[g] = maps.Clone(vars)
		}
	}
	defaultKey := ""
	if home, err := os.UserHomeDir(); err == nil {
		if p := filepath.Join(home, ".ssh", "id_rsa"); fileExists(p) {
			defaultKey = p
		}
	}
	for i := range c.Spec.Hosts {
		h := &c.Spec.Hosts[i]
		ih := inventory.Host{
			Name:     h.Name,
			Local:    h.Connection == "local" || h.Connection == "" && valid.IsLocalAddress(h.Address),
			Address:  h.Address,
			Port:     h.Port,
			User:     h.User,
			Password: h.Password,
			Vars:     hostVars(h, groups),
			CredentialsHint: "set privateKeyPath (with privateKeyPassphrase when it is encrypted) or password " +
				"for this host in cluster.yaml",
		}
		maps.Copy(ih.Vars, h.Vars)
		if ih.Port == 0 {
			ih.Port = 22
		}
		if ih.User == "" {
			ih.User = "root"
		}
		switch {
		case ih.Local:
		case h.PrivateKeyPath != "":
			ih.PrivateKeyPath = c.ResolvePath(h.PrivateKeyPath)
		default:
			ih.PrivateKeyPath = defaultKey
		}
		ih.Passphrase = h.Passphrase
		ih.BecomePassword = h.SudoPassword
		if ih.BecomePassword == "" {
			ih.BecomePassword = h.Password
		}
		if b := cmp.Or(h.Bastion, c.Spec.Bastion); b != nil && !ih.Local {
			ih.Bastion = &inventory.Bastion{
				Address:        b.Address,
				Port:           cmp.Or(b.Port, 22),
				User:           cmp.Or(b.User, ih.User),
				Password:       b.Password,
				PrivateKeyPath: ih.PrivateKeyPath,
				Passphrase:     cmp.Or(b.Passphrase, ih.Passphrase),
			}
			if b.PrivateKeyPath != "" {
				ih.Bastion.PrivateKeyPath = c.ResolvePath(b.PrivateKeyPath)
				ih.Bastion.Passphrase = b.Passphrase
			}
		}
		inv.Hosts = append(inv.Hosts, ih)
	}
	return inv, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// groups returns the role groups with ranges expanded, plus the derived
// groups control_plane, k8s_cluster and all. Every group is present, empty
// or not, so playbooks can name it.
func (c *Cluster) groups() (map[string][]string, error) {
	out := map[string][]string{}
	var problems []string
	for _, g := range c.Spec.RoleGroups.All() {
		members := []string{}
		seen := map[string]bool{}
		for _, m := range *g.Members {
			names, err := hostrange.Expand(m)
			if err != nil {
				problems = append(problems, fmt.Sprintf("roleGroups.%s: %v", g.Name, err))
				continue
			}
			for _, n := range names {
				if !seen[n] {
					seen[n] = true
					members = append(members, n)
				}
			}
		}
		out[g.Name] = members
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("cluster %s: %s", c.Metadata.Name, strings.Join(problems, "; "))
	}
	out["control_plane"] = slices.Clone(out["master"])
	k8s := slices.Clone(out["master"])
	for _, w := range out["worker"] {
		if !slices.Contains(k8s, w) {
			k8s = append(k8s, w)
		}
	}
	out["k8s_cluster"] = k8s
	all := make([]string, 0, len(c.Spec.Hosts))
	for _, h := range c.Spec.Hosts {
		all = append(all, h.Name)
	}
	out["all"] = all
	return out, nil
}

func hostVars(h *Host, groups map[string][]string) map[string]any {
	vars := map[string]any{"address": h.Address}
	// Without one, the inventory's all-level arch (DefaultArch) applies.
	if h.Arch != "" {
		vars["arch"] = h.Arch
	}
	var v4, v6 string
	for _, a := range h.InternalAddrs() {
		switch {
		case a.Is4() && v4 == "":
			v4 = a.String()
		case a.Is6() && v6 == "":
			v6 = a.String()
		}
	}
	switch {
	case v4 != "":
		vars["internal_address"] = v4
	case v6 != "":
		vars["internal_address"] = v6 // IPv6-only host
	default:
		vars["internal_address"] = h.Address
	}
	if v4 != "" && v6 != "" {
		vars["internal_address_v6"] = v6
	}
	labels := map[string]any{}
	for k, v := range h.Labels {
		labels[k] = v
	}
	vars["labels"] = labels
	roles := []any{}
	for _, g := range []string{"etcd", "master", "worker", "registry", "loadbalancer"} {
		if slices.Contains(groups[g], h.Name) {
			roles = append(roles, g)
		}
	}
	vars["roles"] = roles
	return vars
}

// specVars turns the spec into plain maps and lists keyed by the YAML names,
// with every field present (zero when unset) so roles can read
// spec.etcd.external.endpoints without guarding each level. Connection
// secrets (host and bastion passwords, key passphrases, sudo passwords) are
// left out: they travel in inventory.Host, where they are masked.
// specVars is the spec as the variable spec. Each add-on gets kind
// (builtin, yaml or chart) and its files resolved against the cluster file.
func (c *Cluster) specVars() map[string]any {
	m := specVars(&c.Spec)
	for i, a := range c.Spec.Addons {
		am := m["addons"].([]any)[i].(map[string]any)
		am["kind"] = a.Kind()
		manifests, chart, valuesFile := c.AddonPaths(a)
		src := am["sources"].(map[string]any)
		src["yaml"].(map[string]any)["path"] = toVars(reflect.ValueOf(manifests))
		ch := src["chart"].(map[string]any)
		ch["path"], ch["valuesFile"] = chart, valuesFile
	}
	// The roles copy certsPath from the control machine.
	if auths, ok := m["registry"].(map[string]any)["auths"].(map[string]any); ok {
		for name, a := range auths {
			if am, ok := a.(map[string]any); ok && am["certsPath"] != nil && am["certsPath"] != "" {
				am["certsPath"] = c.RegistryCertsDir(name)
			}
		}
	}
	return m
}

func specVars(s *Spec) map[string]any {
	m := toVars(reflect.ValueOf(*s)).(map[string]any)
	dropBastionSecret := func(v any) {
		if bm, ok := v.(map[string]any); ok {
			delete(bm, "password")
			delete(bm, "privateKeyPassphrase")
		}
	}
	for _, h := range m["hosts"].([]any) {
		hm := h.(map[string]any)
		for _, k := range []string{"password", "passwordFile", "privateKeyPassphrase", "sudoPassword"} {
			delete(hm, k)
		}
		dropBastionSecret(hm["bastion"])
	}
	dropBastionSecret(m["bastion"])
	return m
}

func toVars(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return toVars(reflect.New(v.Type().Elem()).Elem())
		}
		return toVars(v.Elem())
	case reflect.Struct:
		out := map[string]any{}
		t := v.Type()
		for i := range t.NumField() {
			if name := YAMLName(t.Field(i)); name != "" {
				out[name] = toVars(v.Field(i))
			}
		}
		return out
	case reflect.Slice:
		out := make([]any, v.Len())
		for i := range out {
			out[i] = toVars(v.Index(i))
		}
		return out
	case reflect.Map:
		out := make(map[string]any, v.Len())
		iter := v.MapRange()
		for iter.Next() {
			out[iter.Key().String()] = toVars(iter.Value())
		}
		return out
	case reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return toVars(v.Elem())
	case reflect.Int, reflect.Int64:
		return int(v.Int())
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return v.Bool()
	case reflect.Float64:
		return v.Float()
	}
	return v.Interface()
}

func registryPasswords(c *Cluster) []string {
	var out []string
	for _, a := range c.Spec.Registry.Auths {
		if a.Password != "" {
			out = append(out, a.Password)
		}
	}
	return out
}

// operatorKeyVar is the key file of the in-cluster controller, "" without
// spec.operator.enabled (or when validation refused it).
func operatorKeyVar(c *Cluster) string {
	if !c.Spec.Operator.Enabled {
		return ""
	}
	key, _, _ := c.OperatorKey()
	return key
}

// InternalAddrs returns a host's internal addresses (internalAddress, else
// address when it is an IP). Invalid entries are skipped: validate reports
// them.
func (h *Host) InternalAddrs() []netip.Addr {
	src := h.InternalAddress
	if src == "" {
		src = h.Address
	}
	var out []netip.Addr
	for _, p := range strings.Split(src, ",") {
		if a, err := netip.ParseAddr(strings.TrimSpace(p)); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// RoleGroup is one roleGroups list with its key name.
type RoleGroup struct {
	Name    string
	Members *[]string
}

func (rg *RoleGroups) All() []RoleGroup {
	return []RoleGroup{
		{"etcd", &rg.Etcd},
		{"master", &rg.Master},
		{"worker", &rg.Worker},
		{"registry", &rg.Registry},
		{"loadbalancer", &rg.Loadbalancer},
	}
}
