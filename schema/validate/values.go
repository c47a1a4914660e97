package validate

import (
	"github.com/mensylisir/kubexm/schema"

	"fmt"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	// The zone database compiled in: a timezone is checked the same way on
	// every control machine, also on one without /usr/share/zoneinfo (a
	// minimal container). time.LoadLocation still prefers the machine's own
	// database, so a zone newer than this Go release is accepted where the
	// machine knows it. The host must know the zone too; the timezone
	// builtin says so when it does not.
	_ "time/tzdata"

	"github.com/mensylisir/kubexm/schema/internal/fieldpath"
	"github.com/mensylisir/kubexm/schema/internal/valid"
)

// Values from cluster.yaml end up in shell scripts, systemd units,
// configuration files and command lines on the hosts. The roles quote them,
// but a value that cannot mean what its field means is refused here first,
// with its position, so a typo or a hostile ticket never reaches a host.

// clusterDirs are directories other roles own; a data directory that is one
// of them, or a parent of one, would be removed with it on delete.
var clusterDirs = []string{
	"/etc/kubernetes", "/etc/kubernetes/pki", "/var/lib/kubelet", "/etc/cni", "/etc/cni/net.d",
	"/opt/cni", "/opt/cni/bin", "/etc/containerd", "/run/containerd", "/var/lib/cni", "/var/log/pods",
	"/var/log/containers", "/var/lib/kubexm",
}

// checkPath checks an absolute host path. removed says a role removes it on
// delete: then it must not be a system directory or a directory of another
// component, nor hold one.
func checkPath(ps *schema.Problems, p, v string, removed bool) {
	if v == "" {
		return
	}
	if msg, hint := valid.PathProblem(v, removed); msg != "" {
		ps.Add(p, hint, "%s", msg)
		return
	}
	if !removed {
		return
	}
	for _, d := range clusterDirs {
		if v == d || strings.HasPrefix(d, v+"/") {
			ps.Add(p, "delete removes this directory; give one of its own", "%s is (or holds) %s, which another component uses", v, d)
			return
		}
	}
}

// removedDirs are the data directories roles remove on delete, by field.
func removedDirs(c *schema.Cluster) []struct{ path, value string } {
	r := &c.Spec.Registry
	out := []struct{ path, value string }{
		{"spec.registry.containerdDataDir", r.ContainerdDataDir},
		{"spec.registry.dockerDataDir", r.DockerDataDir},
		{"spec.registry.registryDataDir", r.RegistryDataDir},
	}
	if c.Spec.Etcd.Type != "external" {
		out = append(out, struct{ path, value string }{"spec.etcd.dataDir", c.Spec.Etcd.DataDir})
	}
	if o := c.Spec.Storage.OpenEBS; o != nil {
		out = append(out, struct{ path, value string }{"spec.storage.openebs.basePath", o.BasePath})
	}
	return out
}

func validatePaths(c *schema.Cluster, ps *schema.Problems) {
	dirs := removedDirs(c)
	for _, d := range dirs {
		checkPath(ps, d.path, d.value, true)
	}
	// Two components sharing a directory delete each other's data.
	for i, a := range dirs {
		for _, b := range dirs[i+1:] {
			if a.value == "" || b.value == "" {
				continue
			}
			if overlaps(a.value, b.value) {
				ps.Add(b.path, "each component needs a directory of its own", "%s overlaps %s (%s)", b.value, a.path, a.value)
			}
		}
	}
	// The scheduled snapshots stay after delete, but must not land in a
	// system directory or in a directory delete removes.
	if e := c.Spec.Etcd; e.BackupPeriod > 0 && e.BackupDir != "" {
		p := "spec.etcd.backupDir"
		checkPath(ps, p, e.BackupDir, true)
		for _, d := range dirs {
			if d.value != "" && overlaps(e.BackupDir, d.value) {
				ps.Add(p, "delete removes "+d.value+": keep the snapshots in a directory of their own", "%s overlaps %s (%s)", e.BackupDir, d.path, d.value)
			}
		}
	}
	for name, a := range c.Spec.Registry.Auths {
		p := fieldpath.Child(fieldpath.Key(fieldpath.Child("spec.registry", "auths"), name), "certsPath")
		if a.CertsPath != "" && !valid.PathChars.MatchString(a.CertsPath) {
			ps.Add(p, "letters, digits and . _ + @ / - only", "path %q holds characters that a path here must not have", a.CertsPath)
		}
		if a.CertsPath != "" && valid.PathChars.MatchString(a.CertsPath) {
			if st, err := os.Stat(c.ResolvePath(a.CertsPath)); err != nil || !st.IsDir() {
				ps.Add(p, "a directory of this machine (relative to the cluster file) holding the registry's CA as *.crt", "certsPath %s is not a directory", c.ResolvePath(a.CertsPath))
			}
		}
		if a.CertsPath != "" && (a.SkipTLSVerify || a.PlainHTTP) {
			ps.Add(p, "keep certsPath to verify the registry, or drop it to skip verification", "certsPath names a CA, but skipTLSVerify or plainHTTP says not to verify one")
		}
	}
}

// overlaps says whether two directories are the same or one holds the other.
func overlaps(a, b string) bool {
	return a == b || strings.HasPrefix(b, a+"/") || strings.HasPrefix(a, b+"/")
}

func validatePackages(c *schema.Cluster, ps *schema.Problems) {
	for i, d := range c.Spec.System.Debs {
		if !valid.DebName.MatchString(d) {
			hint := "a Debian package name: lower-case letters, digits, + - . (e.g. curl, libc6:amd64)"
			if strings.ContainsAny(d, "=<>") {
				hint = "write the name only; versions are not supported here"
			}
			ps.Add(fieldpath.Index("spec.system.debs", i), hint, "%q is not a Debian package name", d)
		}
	}
	for i, r := range c.Spec.System.RPMs {
		if !valid.RpmName.MatchString(r) {
			ps.Add(fieldpath.Index("spec.system.rpms", i), "an RPM package name: letters, digits, _ . + - (e.g. curl, NetworkManager)", "%q is not an RPM package name", r)
		}
	}
}

// userName is what useradd accepts everywhere (shadow-utils' default
// NAME_REGEX, with upper case and . as most distributions allow).
var userName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,31}$`)

func validateUsers(c *schema.Cluster, ps *schema.Problems) {
	check := func(p, u string) {
		if u != "" && !userName.MatchString(u) {
			ps.Add(p, "letters, digits, _ . - (not first), at most 32 characters", "%q is not a user name", u)
		}
	}
	if b := c.Spec.Bastion; b != nil {
		check("spec.bastion.user", b.User)
	}
	for i := range c.Spec.Hosts {
		h := &c.Spec.Hosts[i]
		p := fieldpath.Index("spec.hosts", i)
		check(fieldpath.Child(p, "user"), h.User)
		if h.Bastion != nil {
			check(fieldpath.Child(fieldpath.Child(p, "bastion"), "user"), h.Bastion.User)
		}
		validateLabels(ps, fieldpath.Child(p, "labels"), h.Labels)
	}
}

func validateLabels(ps *schema.Problems, p string, labels map[string]string) {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := labels[k]
		if msg := valid.LabelKeyError(k); msg != "" {
			ps.Add(fieldpath.Key(p, k), "e.g. example.com/zone or disktype", "invalid label key %q: %s", k, msg)
		}
		if v != "" && (len(v) > 63 || !valid.LabelName.MatchString(v)) {
			ps.Add(fieldpath.Key(p, k), "at most 63 letters, digits, - _ . starting and ending with a letter or digit, or empty", "invalid label value %q", v)
		}
	}
}

// isRegistryURL accepts an http(s) URL of a registry (a mirror), or a plain
// host[:port].
func isRegistryURL(s string) bool {
	if !strings.Contains(s, "://") {
		return valid.IsHostPort(s)
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	return valid.IsHostPort(u.Host) && valid.PathChars.MatchString("/"+strings.TrimPrefix(u.Path, "/"))
}

// imagePath is a repository namespace: lower-case components separated by /.
var imagePath = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*$`)

func validateNames(c *schema.Cluster, ps *schema.Problems) {
	s := &c.Spec
	for i, n := range s.System.NTPServers {
		if strings.TrimSpace(n) != "" && !valid.IsHostOrIP(n) {
			ps.Add(fieldpath.Index("spec.system.ntpServers", i), "a host name or an IP address", "%q is not an NTP server", n)
		}
	}
	if tz := s.System.Timezone; tz != "" {
		if _, err := time.LoadLocation(tz); err != nil || tz == "Local" || strings.ContainsAny(tz, " \t\n") {
			ps.Add("spec.system.timezone", "a zone of the tz database, e.g. Asia/Shanghai or UTC", "unknown timezone %q", tz)
		}
	}
	if cn := s.Kubernetes.ClusterName; cn != "" && !valid.IsDNS1123Subdomain(cn) {
		ps.Add("spec.kubernetes.clusterName", "a DNS domain such as cluster.local", "%q is not a DNS domain", cn)
	}
	cr := &s.Kubernetes.ContainerRuntime
	if v := cr.Version; v != "" && !valid.RuntimeVersion.MatchString(v) {
		ps.Add("spec.kubernetes.containerRuntime.version", "e.g. 1.7.27", "invalid version %q", v)
	}
	for name, rs := range map[string]*schema.RuntimeSettings{"containerd": cr.Containerd, "docker": cr.Docker, "crio": cr.Crio, "isula": cr.Isula} {
		if rs == nil {
			continue
		}
		p := fieldpath.Child("spec.kubernetes.containerRuntime", name)
		for i, m := range rs.RegistryMirrors {
			if !isRegistryURL(m) {
				ps.Add(fieldpath.Index(fieldpath.Child(p, "registryMirrors"), i), "e.g. https://mirror.example.com or mirror.example.com:5000", "%q is not a registry URL", m)
			}
		}
		for i, r := range rs.InsecureRegistries {
			if !valid.IsHostPort(r) {
				ps.Add(fieldpath.Index(fieldpath.Child(p, "insecureRegistries"), i), "a host name or IP, optionally with :port", "%q is not a registry host", r)
			}
		}
	}
	for g := range s.Kubernetes.FeatureGates {
		if !valid.FeatureGate.MatchString(g) {
			ps.Add(fieldpath.Key("spec.kubernetes.featureGates", g), "feature gates are CamelCase names such as InPlacePodVerticalScaling", "%q is not a feature gate name", g)
		}
	}
	for i, a := range s.Kubernetes.KubeletArgs {
		if !valid.KubeletArg.MatchString(a) {
			ps.Add(fieldpath.Index("spec.kubernetes.kubeletArgs", i), "write --flag=value: a lower-case flag name, a value without spaces, quotes, backslashes or $", "%q is not a kubelet flag", a)
		}
	}
	r := &s.Registry
	// An existing registry may keep the cluster's images under a path, as
	// Harbor keeps a project's: host[:port]/project. The images are named
	// <privateRegistry>/<path>; credentials and CAs stay per host.
	if host, path, _ := strings.Cut(r.PrivateRegistry, "/"); r.PrivateRegistry != "" && (!valid.IsHostPort(host) || strings.Contains(r.PrivateRegistry, "/") && !imagePath.MatchString(path)) {
		ps.Add("spec.registry.privateRegistry", "a host name, optionally with :port and a /project path (lower-case letters, digits, . _ - and /)", "%q is not a valid registry host", r.PrivateRegistry)
	}
	if r.NamespaceOverride != "" && !imagePath.MatchString(r.NamespaceOverride) {
		ps.Add("spec.registry.namespaceOverride", "lower-case letters, digits, . _ - and /", "%q is not an image namespace", r.NamespaceOverride)
	}
	for name, a := range r.Auths {
		p := fieldpath.Key("spec.registry.auths", name)
		if name != "" && !valid.IsHostPort(name) {
			ps.Add(p, "the registry's host name, optionally with :port", "%q is not a registry host", name)
		}
		// Written into containerd's TOML, which has no escape for most
		// control characters. The password is not shown.
		if valid.HasControl(a.Username) {
			ps.Add(fieldpath.Child(p, "username"), "printable characters only", "user name %q holds a control character", a.Username)
		}
		if valid.HasControl(a.Password) {
			ps.Add(fieldpath.Child(p, "password"), "printable characters only", "the password holds a control character")
		}
	}
	for i, line := range strings.Split(s.DNS.DNSEtcHosts, "\n") {
		if msg := hostsLineError(line); msg != "" {
			ps.Add("spec.dns.dnsEtcHosts", "hosts(5) lines: an IP address, then names", "line %d: %s", i+1, msg)
		}
	}
	if d := s.DNS.CoreDNS; d != nil {
		for i, u := range d.UpstreamDNSServers {
			if !valid.IsHostPort(u) {
				ps.Add(fieldpath.Index("spec.dns.coredns.upstreamDNSServers", i), "an IP address, optionally with :port", "%q is not a DNS server", u)
			}
		}
		validateZones(ps, "spec.dns.coredns.externalZones", d.ExternalZones)
	}
	if d := s.DNS.NodeLocalDNS; d != nil {
		validateZones(ps, "spec.dns.nodelocaldns.externalZones", d.ExternalZones)
		if a, err := netip.ParseAddr(d.LocalIP); d.LocalIP != "" && (err != nil || !a.Is4() || !a.IsLinkLocalUnicast()) {
			ps.Add("spec.dns.nodelocaldns.localIP", "an IPv4 link-local address such as 169.254.25.10, which no node or pod uses",
				"%q is not an IPv4 link-local address", d.LocalIP)
		}
	}
}

func validateZones(ps *schema.Problems, p string, zones []schema.ExternalZone) {
	for i, z := range zones {
		zp := fieldpath.Index(p, i)
		for j, name := range z.Zones {
			if !isZone(name) {
				ps.Add(fieldpath.Index(fieldpath.Child(zp, "zones"), j), "a DNS zone such as example.com, optionally with :port", "%q is not a DNS zone", name)
			}
		}
		for j, ns := range z.Nameservers {
			if !valid.IsHostPort(ns) {
				ps.Add(fieldpath.Index(fieldpath.Child(zp, "nameservers"), j), "an IP address, optionally with :port", "%q is not a name server", ns)
			}
		}
		if z.Cache < 0 {
			ps.Add(fieldpath.Child(zp, "cache"), "seconds; 0 turns caching off", "must not be negative")
		}
	}
}

// hostsLineError checks one hosts(5) line of dnsEtcHosts, which CoreDNS
// reads inside its hosts { } block: a stray } or directive would change
// the Corefile.
func hostsLineError(line string) string {
	if i := strings.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	f := strings.Fields(line)
	if len(f) == 0 {
		return ""
	}
	if _, err := netip.ParseAddr(f[0]); err != nil {
		return fmt.Sprintf("%q is not an IP address", f[0])
	}
	if len(f) == 1 {
		return "an address without a name"
	}
	for _, n := range f[1:] {
		if !valid.IsHostname(strings.TrimSuffix(n, "."), false) {
			return fmt.Sprintf("%q is not a host name", n)
		}
	}
	return ""
}

// isZone accepts a Corefile zone: a DNS name (or . for all), optionally
// with a trailing dot and a :port.
func isZone(z string) bool {
	if h, port, ok := strings.Cut(z, ":"); ok {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return false
		}
		z = h
	}
	z = strings.TrimSuffix(z, ".")
	return z == "" || valid.IsHostname(z, false)
}

// validateValues runs the checks of this file.
func validateValues(c *schema.Cluster, ps *schema.Problems) {
	validatePaths(c, ps)
	validatePackages(c, ps)
	validateUsers(c, ps)
	validateNames(c, ps)
}
