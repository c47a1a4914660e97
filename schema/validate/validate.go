package validate

import (
	"github.com/mensylisir/kubexm/internal/suggest"
	"github.com/mensylisir/kubexm/schema"

	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/mensylisir/kubexm/schema/hostrange"
	"github.com/mensylisir/kubexm/schema/internal/fieldpath"
	"github.com/mensylisir/kubexm/schema/internal/valid"
)

// expandRoleGroups replaces range members (node[1:3]) by the names they
// stand for and drops duplicates, keeping each expanded name's position at
// the member it came from.
func expandRoleGroups(c *schema.Cluster, ps *schema.Problems) {
	if n := len(c.Spec.Hosts); n > schema.MaxHosts {
		ps.Add("spec.hosts", "kubexm manages clusters of up to that many hosts", "%d hosts, more than the limit of %d", n, schema.MaxHosts)
		return
	}
	// Sizes first: nothing is expanded when all ranges together are too many.
	total := 0
	for _, g := range c.Spec.RoleGroups.All() {
		for _, m := range *g.Members {
			n, err := hostrange.Size(m)
			if err == nil {
				total += n
			}
		}
	}
	if total > hostrange.MaxTotalRangeHosts {
		ps.Add("spec.roleGroups", "list fewer hosts, or use fewer and smaller ranges",
			"the role groups name %d hosts together, more than the limit of %d", total, hostrange.MaxTotalRangeHosts)
		return
	}
	for _, g := range c.Spec.RoleGroups.All() {
		path := fieldpath.Child("spec.roleGroups", g.Name)
		var out []string
		var outPos []schema.Pos
		seen := map[string]bool{}
		for i, m := range *g.Members {
			p := fieldpath.Index(path, i)
			pos := ps.PosOf(p)
			names, err := hostrange.Expand(m)
			if err != nil {
				ps.Add(p, "", "%v", err)
				continue
			}
			var twice []string
			for _, n := range names {
				if seen[n] {
					twice = append(twice, n)
					continue
				}
				seen[n] = true
				out = append(out, n)
				outPos = append(outPos, pos)
			}
			// One warning per member, however many names it repeats.
			switch {
			case len(twice) == 1:
				ps.Warn(p, "host %s is listed twice in roleGroups.%s", twice[0], g.Name)
			case len(twice) > 1:
				ps.Warn(p, "%d hosts of %s (%s, ...) are listed twice in roleGroups.%s", len(twice), m, twice[0], g.Name)
			}
		}
		if len(out) == len(*g.Members) && slices.Equal(out, *g.Members) {
			continue
		}
		*g.Members = out
		for j, pos := range outPos {
			ps.SetPos(fieldpath.Index(path, j), pos)
		}
	}
}

// parseDualStack parses "a" or "a,b" where a and b are of different IP
// families, using parse for each part.
func parseDualStack[T interface{ Addr() netip.Addr }](s string, parse func(string) (T, error)) ([]T, error) {
	parts := strings.Split(s, ",")
	if len(parts) > 2 {
		return nil, fmt.Errorf("at most two values (one IPv4, one IPv6), got %d", len(parts))
	}
	var out []T
	for _, p := range parts {
		v, err := parse(strings.TrimSpace(p))
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if len(out) == 2 && out[0].Addr().Is4() == out[1].Addr().Is4() {
		return nil, fmt.Errorf("dual stack needs one IPv4 and one IPv6 value")
	}
	return out, nil
}

type addrOf netip.Addr

func (a addrOf) Addr() netip.Addr { return netip.Addr(a) }

func parseAddr(s string) (addrOf, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return addrOf{}, fmt.Errorf("%q is not an IP address", s)
	}
	return addrOf(a.Unmap()), nil
}

type prefixOf netip.Prefix

func (p prefixOf) Addr() netip.Addr { return netip.Prefix(p).Addr() }

func parsePrefix(s string) (prefixOf, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return prefixOf{}, fmt.Errorf("%q is not a CIDR (address/prefix-length)", s)
	}
	if p.Masked() != p {
		return prefixOf{}, fmt.Errorf("%q has host bits set; the network is %s", s, p.Masked())
	}
	return prefixOf(p), nil
}

// NameError is a cluster name that metadata.name refuses, with the rule.
type NameError struct {
	Message string
	Rule    string
}

func (e *NameError) Error() string { return e.Message + " (" + e.Rule + ")" }

// CheckClusterName applies metadata.name's rule, for commands that write a
// name into a file (create config) and must not write one validation
// refuses.
func CheckClusterName(name string) error {
	switch {
	case name == "":
		return &NameError{Message: "missing cluster name", Rule: "e.g. name: mycluster"}
	case !valid.IsDNS1123Subdomain(name):
		return &NameError{Message: fmt.Sprintf("%q is not a valid cluster name", name), Rule: "lowercase letters, digits, '-' and '.'"}
	}
	return nil
}

// validate checks every rule and records all violations in ps.
func validate(c *schema.Cluster, ps *schema.Problems) {
	if c.APIVersion != schema.APIVersion {
		ps.Add("apiVersion", "", "unsupported apiVersion %q; want %s (or kubekey.kubesphere.io/v1alpha2, converted)", c.APIVersion, schema.APIVersion)
	}
	if c.Kind != schema.Kind {
		ps.Add("kind", "", "kind must be %s, got %q", schema.Kind, c.Kind)
	}
	if err := CheckClusterName(c.Metadata.Name); err != nil {
		var ne *NameError
		if errors.As(err, &ne) {
			ps.Add("metadata.name", ne.Rule, "%s", ne.Message)
		}
	}
	checkEnums(reflect.ValueOf(&c.Spec).Elem(), "spec", ps)
	names := validateHosts(c, ps)
	validateRoleGroups(c, names, ps)
	validateVars(c, ps)
	validateEndpoint(c, ps)
	validateKubernetes(c, ps)
	validateEtcd(c, ps)
	validateNetwork(c, ps)
	validateRegistry(c, ps)
	validateRegistryProxy(c, ps)
	validateMisc(c, ps)
	validateHooks(c, ps)
	validateAddons(c, ps)
	validateOperator(c, ps)
	validateValues(c, ps)
}

// checkEnums checks every string field carrying an `enum` tag.
func checkEnums(v reflect.Value, path string, ps *schema.Problems) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			checkEnums(v.Elem(), path, ps)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Struct {
			for i := range v.Len() {
				checkEnums(v.Index(i), fieldpath.Index(path, i), ps)
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name := schema.YAMLName(f)
			if name == "" {
				continue
			}
			p := fieldpath.Child(path, name)
			enum, ok := f.Tag.Lookup("enum")
			if ok && f.Type.Kind() == reflect.String {
				got := v.Field(i).String()
				allowed := strings.Split(enum, ",")
				// Empty is "not set": SetDefaults fills the fields that
				// need a value, the rest are unused in this configuration.
				if got != "" && !slices.Contains(allowed, got) {
					shown := slices.DeleteFunc(slices.Clone(allowed), func(s string) bool { return s == "" })
					hint := suggest.DidYouMean(got, shown)
					if hint == "" {
						hint = "one of " + strings.Join(shown, ", ")
					} else {
						hint += " (one of " + strings.Join(shown, ", ") + ")"
					}
					ps.Add(p, hint, "invalid value %q", got)
				}
				continue
			}
			checkEnums(v.Field(i), p, ps)
		}
	}
}

func validateHosts(c *schema.Cluster, ps *schema.Problems) []string {
	validateBastion(c, ps, "spec.bastion", c.Spec.Bastion)
	if len(c.Spec.Hosts) == 0 {
		ps.Add("spec.hosts", "run `kubexm create config` for a sample", "no hosts")
	}
	var names []string
	seen := map[string]int{}
	for i := range c.Spec.Hosts {
		h := &c.Spec.Hosts[i]
		p := fieldpath.Index("spec.hosts", i)
		switch {
		case h.Name == "":
			ps.Add(fieldpath.Child(p, "name"), "", "missing host name")
		case !valid.IsDNS1123Subdomain(h.Name):
			ps.Add(fieldpath.Child(p, "name"), "host names become node names: lowercase letters, digits, '-' and '.'", "%q is not a valid DNS-1123 name", h.Name)
		}
		if j, dup := seen[h.Name]; dup && h.Name != "" {
			ps.Add(fieldpath.Child(p, "name"), "", "duplicate host name %q (also hosts[%d])", h.Name, j)
		} else {
			seen[h.Name] = i
			names = append(names, h.Name)
		}
		switch {
		case h.Address == "":
			ps.Add(fieldpath.Child(p, "address"), "", "missing address")
		default:
			if _, err := netip.ParseAddr(h.Address); err != nil && !valid.IsHostname(h.Address, false) {
				ps.Add(fieldpath.Child(p, "address"), "an IP address or a DNS name", "invalid address %q", h.Address)
			}
		}
		if h.InternalAddress != "" {
			if _, err := parseDualStack(h.InternalAddress, parseAddr); err != nil {
				ps.Add(fieldpath.Child(p, "internalAddress"), `"IPv4" or "IPv4,IPv6"`, "%v", err)
			}
		}
		if h.Port < 1 || h.Port > 65535 {
			ps.Add(fieldpath.Child(p, "port"), "", "port %d out of range 1..65535", h.Port)
		}
		if h.PrivateKeyPath != "" && h.Connection != "local" {
			if _, err := os.Stat(c.ResolvePath(h.PrivateKeyPath)); err != nil {
				ps.Add(fieldpath.Child(p, "privateKeyPath"), "relative paths are relative to the cluster file", "private key not found: %v", err)
			}
		}
		validateBastion(c, ps, fieldpath.Child(p, "bastion"), h.Bastion)
	}
	validateUniqueAddrs(c, ps)
	return names
}

// validateUniqueAddrs refuses two hosts on one machine: a shared internal
// address makes etcd peers, certificates and node IPs collide, and a shared
// address and port means one SSH target is set up twice under two names.
// The same address with different ports stays valid (hosts behind one NAT
// gateway), as long as their internal addresses differ.
func validateUniqueAddrs(c *schema.Cluster, ps *schema.Problems) {
	type target struct {
		addr string // an IP in its canonical form, or a DNS name in lower case
		port int
	}
	byTarget := map[target]int{}
	byInternal := map[netip.Addr]int{}
	for i := range c.Spec.Hosts {
		h := &c.Spec.Hosts[i]
		p := fieldpath.Index("spec.hosts", i)
		t := target{strings.ToLower(h.Address), h.Port}
		if a, err := netip.ParseAddr(h.Address); err == nil {
			t.addr = a.Unmap().String()
		}
		// localhost is the control machine, which several hosts may stand
		// for in a test or a demo (connection local).
		if t.addr != "" && !valid.IsLocalAddress(h.Address) {
			if j, dup := byTarget[t]; dup {
				ps.Add(fieldpath.Child(p, "address"), "each host is a machine of its own; list it once",
					"address %s port %d is also hosts[%d] (%s)", t.addr, h.Port, j, c.Spec.Hosts[j].Name)
			} else {
				byTarget[t] = i
			}
		}
		field := "internalAddress"
		if h.InternalAddress == "" {
			field = "address"
		}
		for _, a := range h.InternalAddrs() {
			if j, dup := byInternal[a]; dup {
				ps.Add(fieldpath.Child(p, field), "internal addresses are the nodes' IPs and must differ",
					"internal address %s is also the internal address of hosts[%d] (%s)", a, j, c.Spec.Hosts[j].Name)
				continue
			}
			byInternal[a] = i
		}
	}
}

func validateRoleGroups(c *schema.Cluster, names []string, ps *schema.Problems) {
	rg := &c.Spec.RoleGroups
	known := make(map[string]bool, len(names))
	for _, n := range names {
		known[n] = true
	}
	for _, g := range rg.All() {
		path := fieldpath.Child("spec.roleGroups", g.Name)
		missing := 0
		for i, m := range *g.Members {
			if known[m] {
				continue
			}
			// A wrong range can name thousands of hosts; a few lines
			// show the mistake better than all of them.
			if missing++; missing <= maxMissingShown {
				ps.Add(fieldpath.Index(path, i), suggest.DidYouMean(m, names), "host %q is not in spec.hosts", m)
			}
		}
		if missing > maxMissingShown {
			ps.Add(path, "", "%d more members are not in spec.hosts", missing-maxMissingShown)
		}
	}
	if len(rg.Master) == 0 {
		ps.Add("spec.roleGroups.master", "", "at least one master is required")
	}
	switch c.Spec.Etcd.Type {
	case "external":
		if len(rg.Etcd) > 0 {
			ps.Add("spec.roleGroups.etcd", "remove the etcd group or change etcd.type", "etcd hosts are listed but etcd.type is external")
		}
	case "kubeadm":
		if len(rg.Etcd) > 0 && !sameSet(rg.Etcd, rg.Master) {
			ps.Add("spec.roleGroups.etcd", "kubeadm runs a stacked etcd member on every master", "with etcd.type kubeadm the etcd group must equal the master group")
		}
	default:
		if len(rg.Etcd) == 0 {
			ps.Add("spec.roleGroups.etcd", "list at least one host, or set etcd.type: external", "at least one etcd host is required")
		}
	}
	// Stacked etcd exists only in kubeadm mode. (kubeadm mode with an etcd
	// of kubexm's or the user's is a support-matrix matter: Support.check.)
	if c.Spec.Etcd.Type == "kubeadm" && c.Spec.Kubernetes.Type != "kubeadm" {
		ps.Add("spec.etcd.type", "set kubernetes.type: kubeadm, or etcd.type: kubexm",
			"etcd.type kubeadm (a stacked member on every master) needs kubernetes.type kubeadm, not %s", c.Spec.Kubernetes.Type)
	}
	// The snapshot timer is roles/etcd's: etcdctl and a client certificate
	// are on the hosts of an etcd kubexm installed, and nowhere else.
	if e := c.Spec.Etcd; e.BackupPeriod != 0 {
		if e.BackupPeriod < 0 {
			ps.Add("spec.etcd.backupPeriod", "minutes between snapshots, e.g. 1440 for one a day; 0 schedules none", "backupPeriod %d is negative", e.BackupPeriod)
		} else if e.Type != "kubexm" {
			ps.Add("spec.etcd.backupPeriod", "take snapshots with `kubexm play backup` (etcd.type kubexm) or with your etcd's own tooling",
				"scheduled backups run on the hosts of an etcd kubexm installs (etcd.type kubexm), not with etcd.type %s", e.Type)
		}
	}
	if c.Spec.Etcd.KeepBackupNumber < 0 {
		ps.Add("spec.etcd.keepBackupNumber", "how many scheduled snapshots each host keeps, e.g. 5", "keepBackupNumber %d is negative", c.Spec.Etcd.KeepBackupNumber)
	}
	if n := len(rg.Etcd); n > 0 && n%2 == 0 {
		ps.Warn("spec.roleGroups.etcd", "%d etcd members tolerate no more failures than %d; use an odd number", n, n-1)
	}
	if len(rg.Registry) > 1 {
		ps.Add("spec.roleGroups.registry", "", "at most one registry host, got %d", len(rg.Registry))
	}
}

const maxMissingShown = 5

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func validateEndpoint(c *schema.Cluster, ps *schema.Problems) {
	cpe := &c.Spec.ControlPlaneEndpoint
	const base = "spec.controlPlaneEndpoint"
	lbHosts := len(c.Spec.RoleGroups.Loadbalancer)
	var vip netip.Addr
	if cpe.LBAddress != "" {
		a, err := netip.ParseAddr(cpe.LBAddress)
		if err != nil {
			ps.Add(fieldpath.Child(base, "lb_address"), "the virtual IP, e.g. 172.16.0.100", "%q is not an IP address", cpe.LBAddress)
		}
		vip = a
	}
	switch cpe.ExternalLoadBalancer {
	case "kubexm":
		if lbHosts == 0 {
			ps.Add(fieldpath.Child(base, "externalLoadBalancer"), "list hosts under roleGroups.loadbalancer", "externalLoadBalancer kubexm needs loadbalancer hosts")
		}
		if cpe.LBAddress == "" {
			ps.Add(fieldpath.Child(base, "lb_address"), "keepalived serves this virtual IP", "externalLoadBalancer kubexm needs lb_address")
		}
		// The loadbalancer hosts' haproxy listens on the endpoint's port on
		// every address, where a master's API server listens already.
		for _, h := range c.Spec.RoleGroups.Loadbalancer {
			if slices.Contains(c.Spec.RoleGroups.Master, h) && cpe.Port == 6443 {
				ps.Add("spec.roleGroups.loadbalancer", "use hosts that are not masters, or another controlPlaneEndpoint.port",
					"loadbalancer host %s is a master: its API server holds port 6443, where haproxy would listen", h)
			}
		}
		// internalLoadbalancer names the proxy beside keepalived (seeds/003):
		// haproxy (the default) or nginx; kube-vip is a VIP of its own.
		if cpe.InternalLoadbalancer == "kube-vip" {
			ps.Add(fieldpath.Child(base, "internalLoadbalancer"), "leave it out, or set haproxy or nginx: the proxy beside keepalived",
				"externalLoadBalancer kubexm holds lb_address with keepalived on the loadbalancer hosts; kube-vip would hold it on the masters")
		}
	case "external":
		if lbHosts > 0 {
			ps.Add("spec.roleGroups.loadbalancer", "remove them, or use externalLoadBalancer: kubexm", "externalLoadBalancer external uses your own load balancer; loadbalancer hosts are not allowed")
		}
		if cpe.LBAddress == "" && !cpe.ExternalDNS {
			ps.Add(fieldpath.Child(base, "lb_address"), "the address of your load balancer", "externalLoadBalancer external needs lb_address")
		}
		// The nodes reach the user's load balancer directly: a local proxy
		// on each would never be installed.
		if cpe.InternalLoadbalancer == "haproxy" || cpe.InternalLoadbalancer == "nginx" {
			ps.Add(fieldpath.Child(base, "internalLoadbalancer"), "leave it out: every node reaches your load balancer at lb_address; or leave externalLoadBalancer out for a local proxy on each node",
				"externalLoadBalancer external says your load balancer serves the API; internalLoadbalancer %s (a proxy on every node) is not used with it", cpe.InternalLoadbalancer)
		}
	case "":
		if lbHosts > 0 {
			ps.Add("spec.roleGroups.loadbalancer", "set controlPlaneEndpoint.externalLoadBalancer: kubexm", "loadbalancer hosts are only used with externalLoadBalancer kubexm")
		}
	}
	if cpe.InternalLoadbalancer == "kube-vip" {
		if cpe.LBAddress == "" {
			ps.Add(fieldpath.Child(base, "lb_address"), "kube-vip announces this virtual IP", "internalLoadbalancer kube-vip needs lb_address")
		}
		if cpe.ExternalLoadBalancer == "external" {
			ps.Add(fieldpath.Child(base, "internalLoadbalancer"), "leave externalLoadBalancer out: kube-vip on the masters is the load balancer",
				"internalLoadbalancer kube-vip holds lb_address itself; externalLoadBalancer external says your load balancer does")
		}
	}
	// A virtual IP that keepalived or kube-vip announces by ARP must be an
	// address a host of the segment can hold for others.
	if vip.IsValid() && (cpe.InternalLoadbalancer == "kube-vip" || cpe.ExternalLoadBalancer == "kubexm") &&
		(vip.IsLoopback() || vip.IsMulticast() || vip.IsUnspecified() || vip.IsLinkLocalUnicast() || vip.IsLinkLocalMulticast()) {
		ps.Add(fieldpath.Child(base, "lb_address"), "a free unicast address of the masters' (or loadbalancer hosts') network",
			"lb_address %s cannot be a virtual IP announced on the network", vip)
	}
	if cpe.ExternalDNS && cpe.LBAddress != "" && cpe.InternalLoadbalancer != "kube-vip" {
		ps.Add(fieldpath.Child(base, "lb_address"), "with externalDNS the domain is resolved by your DNS", "lb_address must be empty when externalDNS is true")
	}
	if vip.IsValid() {
		for i := range c.Spec.Hosts {
			h := &c.Spec.Hosts[i]
			if slices.Contains(h.InternalAddrs(), vip) {
				ps.Add(fieldpath.Child(base, "lb_address"), "a virtual IP must be free", "lb_address %s is the address of host %s", vip, h.Name)
			}
		}
	}
	if cpe.Domain != "" && !valid.IsHostname(cpe.Domain, false) {
		ps.Add(fieldpath.Child(base, "domain"), "", "%q is not a valid DNS name", cpe.Domain)
	}
	if cpe.Port < 1 || cpe.Port > 65535 {
		ps.Add(fieldpath.Child(base, "port"), "", "port %d out of range 1..65535", cpe.Port)
	}
}

func validateKubernetes(c *schema.Cluster, ps *schema.Problems) {
	k := &c.Spec.Kubernetes
	const base = "spec.kubernetes"
	for i, s := range k.APIServerCertExtraSans {
		if _, err := netip.ParseAddr(s); err != nil && !valid.IsHostname(s, true) {
			ps.Add(fieldpath.Index(fieldpath.Child(base, "apiserverCertExtraSans"), i), "", "%q is neither an IP nor a DNS name", s)
		}
	}
	cr := &k.ContainerRuntime
	crPath := fieldpath.Child(base, "containerRuntime")
	blocks := map[string]*schema.RuntimeSettings{"containerd": cr.Containerd, "docker": cr.Docker, "crio": cr.Crio, "isula": cr.Isula}
	selected := strings.ReplaceAll(cr.Type, "cri-o", "crio")
	for _, name := range []string{"containerd", "docker", "crio", "isula"} {
		rs := blocks[name]
		if rs == nil {
			continue
		}
		if name != selected {
			ps.Warn(fieldpath.Child(crPath, name), "ignored: containerRuntime.type is %s", cr.Type)
			continue
		}
		if rs.Version != "" && rs.Version != cr.Version {
			ps.Add(fieldpath.Child(fieldpath.Child(crPath, name), "version"), "set the version in one place", "version %q differs from containerRuntime.version %q", rs.Version, cr.Version)
		}
	}
	if c.Spec.Registry.DockerDataDir != "" && cr.Type != "docker" {
		ps.Warn("spec.registry.dockerDataDir", "ignored: containerRuntime.type is %s, not docker", cr.Type)
	}
	if cr.CustomRole != "" && cr.Type != "custom" {
		ps.Warn(fieldpath.Child(crPath, "customRole"), "ignored: containerRuntime.type is %s, not custom", cr.Type)
	}
	if k.MaxPods < 1 {
		ps.Add(fieldpath.Child(base, "maxPods"), "", "maxPods must be positive, got %d", k.MaxPods)
	}
	if k.PodPidsLimit < -1 {
		ps.Add(fieldpath.Child(base, "podPidsLimit"), "-1 means unlimited", "invalid podPidsLimit %d", k.PodPidsLimit)
	}
	if k.NodeCidrMaskSize < 8 || k.NodeCidrMaskSize > 30 {
		ps.Add(fieldpath.Child(base, "nodeCidrMaskSize"), "usually 24", "nodeCidrMaskSize %d out of range 8..30", k.NodeCidrMaskSize)
	}
}

// etcdMemberSettings are spec.etcd's settings of a member kubexm runs
// (SetDefaults fills them for etcd.type kubexm and kubeadm only), each
// with whether the file sets it.
func etcdMemberSettings(e *schema.Etcd) []struct {
	name string
	set  bool
} {
	return []struct {
		name string
		set  bool
	}{
		{"version", e.Version != ""}, {"dataDir", e.DataDir != ""}, {"heartbeatInterval", e.HeartbeatInterval != 0},
		{"electionTimeout", e.ElectionTimeout != 0}, {"snapshotCount", e.SnapshotCount != 0},
		{"autoCompactionRetention", e.AutoCompactionRetention != nil}, {"metrics", e.Metrics != ""},
		{"quotaBackendBytes", e.QuotaBackendBytes != 0}, {"maxRequestBytes", e.MaxRequestBytes != 0},
		{"maxSnapshots", e.MaxSnapshots != nil}, {"maxWals", e.MaxWals != nil}, {"logLevel", e.LogLevel != ""},
		{"backupDir", e.BackupDir != ""}, {"keepBackupNumber", e.KeepBackupNumber != 0},
	}
}

// validateEtcdMode refuses the etcd settings nothing applies in the
// file's etcd.type (issue 46: none is accepted and ignored): a member's
// settings with an etcd kubexm does not run, the stacked member's version
// (kubeadm runs the etcd image its Kubernetes version pins), the scheduled
// snapshots' settings without roles/etcd's timer, external's settings
// without an external etcd.
func validateEtcdMode(c *schema.Cluster, ps *schema.Problems) {
	e := &c.Spec.Etcd
	const base = "spec.etcd"
	for _, f := range etcdMemberSettings(e) {
		if !f.set {
			continue
		}
		switch {
		case e.Type == "external":
			ps.Add(fieldpath.Child(base, f.name), "set it on your etcd's members, and remove it here",
				"etcd.type external: kubexm runs no etcd member, so %s would not be applied", f.name)
		case e.Type == "kubeadm" && f.name == "version":
			ps.Add(fieldpath.Child(base, f.name), "remove it: kubeadm_etcd_image_version names the image (roles/artifacts' pin of each Kubernetes minor)",
				"etcd.type kubeadm: the stacked member runs the etcd image kubeadm's Kubernetes version pins, not etcd.version %s", e.Version)
		case e.Type != "kubexm" && (f.name == "backupDir" || f.name == "keepBackupNumber"):
			ps.Add(fieldpath.Child(base, f.name), "take snapshots with `kubexm play backup`, or use etcd.type kubexm",
				"etcd.type %s: %s is a setting of the scheduled snapshots, which run on the hosts of an etcd kubexm installs (etcd.type kubexm) only", e.Type, f.name)
		case f.name == "maxSnapshots" && *e.MaxSnapshots != 5:
			ps.Add(fieldpath.Child(base, f.name), "remove it (5, KubeKey's value, is accepted and means the same: nothing)",
				"etcd v3.6 keeps no v2 snapshot files, so maxSnapshots %d would not be applied", *e.MaxSnapshots)
		}
	}
	if x := e.External; e.Type != "external" && x != nil && (len(x.Endpoints) > 0 || x.CAFile != "" || x.CertFile != "" || x.KeyFile != "") {
		ps.Add(fieldpath.Child(base, "external"), "remove it, or set etcd.type: external",
			"etcd.type %s: kubexm's etcd is used, so external (endpoints, caFile, certFile, keyFile) would not be", e.Type)
	}
}

func validateEtcd(c *schema.Cluster, ps *schema.Problems) {
	e := &c.Spec.Etcd
	const base = "spec.etcd"
	validateEtcdMode(c, ps)
	if e.Type == "external" {
		x := e.External
		if x == nil || len(x.Endpoints) == 0 {
			ps.Add(fieldpath.Child(base, "external"), "e.g. external: {endpoints: [https://10.0.0.5:2379]}", "etcd.type external needs external.endpoints")
			return
		}
		xp := fieldpath.Child(base, "external")
		for i, ep := range x.Endpoints {
			u, err := url.Parse(ep)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				ps.Add(fieldpath.Index(fieldpath.Child(xp, "endpoints"), i), "e.g. https://10.0.0.5:2379", "%q is not an http(s) URL", ep)
			}
		}
		if (x.CertFile == "") != (x.KeyFile == "") {
			ps.Add(xp, "", "certFile and keyFile must be set together")
		}
		for name, f := range map[string]string{"caFile": x.CAFile, "certFile": x.CertFile, "keyFile": x.KeyFile} {
			if f == "" {
				continue
			}
			if _, err := os.Stat(c.ResolvePath(f)); err != nil {
				ps.Add(fieldpath.Child(xp, name), "relative paths are relative to the cluster file", "cannot read %s: %v", name, err)
			}
		}
		return
	}
	if !valid.Semverish.MatchString(e.Version) && e.Type != "kubeadm" {
		ps.Add(fieldpath.Child(base, "version"), "e.g. "+schema.DefaultEtcdVersion, "invalid etcd version %q", e.Version)
	}
	if e.HeartbeatInterval <= 0 {
		ps.Add(fieldpath.Child(base, "heartbeatInterval"), "", "must be positive")
	} else if e.ElectionTimeout < 5*e.HeartbeatInterval {
		ps.Add(fieldpath.Child(base, "electionTimeout"), "etcd requires at least 5x heartbeatInterval", "electionTimeout %d is less than 5 x heartbeatInterval %d", e.ElectionTimeout, e.HeartbeatInterval)
	}
	if e.SnapshotCount < 0 {
		ps.Add(fieldpath.Child(base, "snapshotCount"), "", "must not be negative")
	}
	for name, p := range map[string]*int{"autoCompactionRetention": e.AutoCompactionRetention, "maxSnapshots": e.MaxSnapshots, "maxWals": e.MaxWals} {
		if p != nil && *p < 0 {
			ps.Add(fieldpath.Child(base, name), "0 disables the limit", "must not be negative")
		}
	}
	if e.QuotaBackendBytes < 0 || e.MaxRequestBytes < 0 {
		ps.Add(base, "", "quotaBackendBytes and maxRequestBytes must not be negative")
	}
	if e.QuotaBackendBytes > 8*1024*1024*1024 {
		ps.Warn(fieldpath.Child(base, "quotaBackendBytes"), "above 8 GiB; etcd warns at startup and recovery gets slow")
	}
}

func validateNetwork(c *schema.Cluster, ps *schema.Problems) {
	n := &c.Spec.Network
	const base = "spec.network"
	pods, perr := parseDualStack(n.KubePodsCIDR, parsePrefix)
	if perr != nil {
		ps.Add(fieldpath.Child(base, "kubePodsCIDR"), `"v4CIDR" or "v4CIDR,v6CIDR"`, "%v", perr)
	}
	svcs, serr := parseDualStack(n.KubeServiceCIDR, parsePrefix)
	if serr != nil {
		ps.Add(fieldpath.Child(base, "kubeServiceCIDR"), `"v4CIDR" or "v4CIDR,v6CIDR"`, "%v", serr)
	}
	if perr == nil && serr == nil {
		if len(pods) != len(svcs) {
			ps.Add(fieldpath.Child(base, "kubeServiceCIDR"), "give both ranges the same IP families", "kubePodsCIDR has %d families but kubeServiceCIDR has %d", len(pods), len(svcs))
		}
		for _, p := range pods {
			for _, s := range svcs {
				if netip.Prefix(p).Overlaps(netip.Prefix(s)) {
					ps.Add(fieldpath.Child(base, "kubeServiceCIDR"), "pod and service ranges must be disjoint", "%s overlaps kubePodsCIDR %s", netip.Prefix(s), netip.Prefix(p))
				}
			}
		}
		if v4 := firstV4(pods); v4.IsValid() && c.Spec.Kubernetes.NodeCidrMaskSize < v4.Bits() {
			ps.Add("spec.kubernetes.nodeCidrMaskSize", "it must be longer than the pod range prefix", "nodeCidrMaskSize %d is shorter than kubePodsCIDR /%d", c.Spec.Kubernetes.NodeCidrMaskSize, v4.Bits())
		}
		for i := range c.Spec.Hosts {
			h := &c.Spec.Hosts[i]
			for _, a := range h.InternalAddrs() {
				for name, set := range map[string][]prefixOf{"kubePodsCIDR": pods, "kubeServiceCIDR": svcs} {
					for _, p := range set {
						if netip.Prefix(p).Contains(a) {
							ps.Add(fieldpath.Child(base, name), "choose a range that does not contain your machines", "%s contains host %s (%s)", netip.Prefix(p), h.Name, a)
						}
					}
				}
			}
		}
	}
	if n.Plugin == "calico" && n.Calico != nil {
		if n.Calico.IPIPMode != "Never" && n.Calico.VXLANMode != "Never" {
			ps.Add(fieldpath.Child(base, "calico"), "set one of ipipMode or vxlanMode to Never", "ipipMode %s and vxlanMode %s cannot both be on", n.Calico.IPIPMode, n.Calico.VXLANMode)
		}
		if n.Calico.VethMTU < 0 {
			ps.Add(fieldpath.Child(fieldpath.Child(base, "calico"), "vethMTU"), "0 auto-detects", "vethMTU must not be negative")
		}
		bs := n.IPPool.BlockSize
		if bs < 20 || bs > 32 {
			ps.Add(fieldpath.Child(fieldpath.Child(base, "ippool"), "blockSize"), "calico accepts 20..32; default 26", "blockSize %d out of range", bs)
		} else if v4 := firstV4(pods); v4.IsValid() && bs < v4.Bits() {
			ps.Add(fieldpath.Child(fieldpath.Child(base, "ippool"), "blockSize"), "", "blockSize /%d is larger than kubePodsCIDR /%d", bs, v4.Bits())
		}
	}
	if n.CustomRole != "" && n.Plugin != "custom" {
		ps.Warn(fieldpath.Child(base, "customRole"), "ignored: network.plugin is %s, not custom", n.Plugin)
	}
	for name, set := range map[string]bool{"calico": n.Calico != nil, "flannel": n.Flannel != nil, "cilium": n.Cilium != nil} {
		if set && name != n.Plugin {
			ps.Warn(fieldpath.Child(base, name), "ignored: network.plugin is %s", n.Plugin)
		}
	}
}

func firstV4(ps []prefixOf) netip.Prefix {
	for _, p := range ps {
		if netip.Prefix(p).Addr().Is4() {
			return netip.Prefix(p)
		}
	}
	return netip.Prefix{}
}

func validateRegistry(c *schema.Cluster, ps *schema.Problems) {
	r := &c.Spec.Registry
	const base = "spec.registry"
	hosts := len(c.Spec.RoleGroups.Registry)
	switch r.Type {
	case "external":
		if hosts > 0 {
			ps.Add("spec.roleGroups.registry", "remove it or set registry.type to registry or harbor", "registry.type external deploys nothing, but a registry host is listed")
		}
		if r.PrivateRegistry == "" {
			ps.Add(fieldpath.Child(base, "privateRegistry"), "the host name of your registry", "registry.type external needs privateRegistry")
		}
	case "":
		if hosts > 0 {
			ps.Add("spec.roleGroups.registry", "set registry.type: registry to deploy one there, or remove it", "a registry host is listed, but registry.type does not deploy a registry")
		}
	case "registry":
		if hosts == 0 {
			ps.Add("spec.roleGroups.registry", "list the host that runs the registry", "registry.type registry needs a registry host")
		}
		if r.PrivateRegistry == "" {
			ps.Add(fieldpath.Child(base, "privateRegistry"), "the name the nodes reach the registry host by, e.g. registry.example.local:5000", "registry.type registry needs privateRegistry")
		} else if strings.Contains(r.PrivateRegistry, "/") {
			// roles/registry serves host:port, its certificate and account
			// are per host; a project path is an existing registry's.
			ps.Add(fieldpath.Child(base, "privateRegistry"), "name the registry host, e.g. registry.example.local:5000, and use namespaceOverride for a path",
				"registry.type registry deploys a registry named host[:port], not %q", r.PrivateRegistry)
		} else if a := r.Auths[r.PrivateRegistry]; a.Username == "" || a.Password == "" && a.PasswordFile == "" {
			ps.Add(fieldpath.Child(base, "auths"), fmt.Sprintf("add auths: {%q: {username: ..., password: ${ENV}}}", r.PrivateRegistry), "registry.type registry needs the account the registry is given, as auths[privateRegistry] with username and password")
		}
	case "harbor":
		if hosts == 0 {
			ps.Add("spec.roleGroups.registry", "list the host that runs Harbor", "registry.type harbor needs a registry host")
		}
	}
	for name, a := range r.Auths {
		if name == "" {
			ps.Add(fieldpath.Child(base, "auths"), "", "empty registry name")
		}
		// With docker, kubeadm's preflight pulls the control-plane images
		// through cri-dockerd with no credentials (a CRI pull carries only
		// the caller's, and kubeadm has none); dockerd keeps none of its
		// own. The kubelet's config.json (roles/cri-dockerd) serves the
		// kubelet's pulls only.
		if c.Spec.Kubernetes.ContainerRuntime.Type == "docker" && c.Spec.Kubernetes.Type == "kubeadm" &&
			name != "" && name == registryHost(r.PrivateRegistry) && (a.Username != "" || a.Password != "" || a.PasswordFile != "") {
			ps.Add(fieldpath.Key(fieldpath.Child(base, "auths"), name), "use containerRuntime.type containerd, kubernetes.type kubexm, or a privateRegistry that serves the cluster's images without credentials",
				"credentials for privateRegistry are not supported with containerRuntime.type docker and kubernetes.type kubeadm yet: kubeadm pulls the control-plane images through cri-dockerd without them")
		}
	}
}

// registryHost is privateRegistry's host[:port], without a project path.
func registryHost(privateRegistry string) string {
	host, _, _ := strings.Cut(privateRegistry, "/")
	return host
}

func validateMisc(c *schema.Cluster, ps *schema.Problems) {
	for i, s := range c.Spec.System.NTPServers {
		if strings.TrimSpace(s) == "" {
			ps.Add(fieldpath.Index("spec.system.ntpServers", i), "", "empty NTP server")
		}
	}
	for i, e := range c.Spec.Extra.Hosts {
		p := fieldpath.Index("spec.extra.hosts", i)
		if !valid.IsHostname(e.Domain, false) {
			ps.Add(fieldpath.Child(p, "domain"), "", "%q is not a valid DNS name", e.Domain)
		}
		if _, err := netip.ParseAddr(e.Address); err != nil {
			ps.Add(fieldpath.Child(p, "address"), "", "%q is not an IP address", e.Address)
		}
	}
	for i, r := range c.Spec.Extra.Resolves {
		if _, err := netip.ParseAddr(r.Address); err != nil {
			ps.Add(fieldpath.Child(fieldpath.Index("spec.extra.resolves", i), "address"), "", "%q is not an IP address", r.Address)
		}
	}
}

func validateBastion(c *schema.Cluster, ps *schema.Problems, p string, b *schema.Bastion) {
	if b == nil {
		return
	}
	if b.Address == "" {
		ps.Add(fieldpath.Child(p, "address"), "", "missing address")
	} else if _, err := netip.ParseAddr(b.Address); err != nil && !valid.IsHostname(b.Address, false) {
		ps.Add(fieldpath.Child(p, "address"), "an IP address or a DNS name", "invalid address %q", b.Address)
	}
	if b.Port < 0 || b.Port > 65535 {
		ps.Add(fieldpath.Child(p, "port"), "", "port %d out of range 1..65535", b.Port)
	}
	if b.PrivateKeyPath != "" {
		if _, err := os.Stat(c.ResolvePath(b.PrivateKeyPath)); err != nil {
			ps.Add(fieldpath.Child(p, "privateKeyPath"), "relative paths are relative to the cluster file", "private key not found: %v", err)
		}
	}
}
