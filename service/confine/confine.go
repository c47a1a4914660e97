// Package confine keeps the jobs of kubexm server on the hosts of their
// cluster: an API token manages clusters, it never reaches the machine that
// runs the server and its workers. A cluster.yaml received through the API
// is read without touching the server's files or environment, and its hosts
// (and bastions) may not be the server machine: localhost, loopback,
// link-local, unspecified addresses, the machine's own addresses and
// connection: local are refused unless the server's administrator allowed
// their network. The same checks run again on the worker before each job,
// for configs stored before them and for workers on other machines.
package confine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mensylisir/kubexm/schema/matrix"

	"github.com/mensylisir/kubexm/schema/validate"

	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/schema"
)

// Guard checks clusters and jobs against the policy of one server or
// worker.
type Guard struct {
	allow   []netip.Prefix
	support *matrix.Support
	secrets *Secrets
	// own lists the machine's addresses; lookup resolves a host name.
	// Fields for tests: a test machine's own addresses are not the ones
	// a test wants refused.
	own    func() ([]netip.Addr, error)
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)

	// dialed are the checked addresses of each name Dial resolved: a
	// bastion many hosts share, and every reconnect, is resolved and
	// checked once per process, and a reconnect goes to the addresses
	// checked the first time.
	dialMu sync.Mutex
	dialed map[string][]netip.Addr
}

// Config is what a Guard needs.
type Config struct {
	// Allow are networks (CIDR, or single addresses) a host may be in even
	// though the rules refuse it: a lab that runs its test machines on
	// loopback addresses, or connection: local on purpose.
	Allow []string
	// Support is the matrix a cluster.yaml is checked against (nil: the
	// built-in one).
	Support *matrix.Support
	// Secrets are the server's secrets a cluster.yaml may name; nil: none.
	Secrets *Secrets
	// Lookup resolves a host name; nil: the system's resolver.
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

// New makes a Guard.
func New(c Config) (*Guard, error) {
	g := &Guard{support: c.Support, secrets: c.Secrets, own: interfaceAddrs, lookup: lookupHost}
	if c.Lookup != nil {
		g.lookup = c.Lookup
	}
	for _, a := range c.Allow {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		p, err := netip.ParsePrefix(a)
		if err != nil {
			addr, aerr := netip.ParseAddr(a)
			if aerr != nil {
				return nil, fmt.Errorf("--allow-host-networks %q: want a CIDR such as 10.0.0.0/8 or an address: %w", a, err)
			}
			p = netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen())
		}
		g.allow = append(g.allow, p.Masked())
	}
	return g, nil
}

func interfaceAddrs() ([]netip.Addr, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("the machine's addresses: %w", err)
	}
	var out []netip.Addr
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out, nil
}

func lookupHost(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// Refused is a cluster or job the policy refuses: every reason, each
// naming its host.
type Refused struct{ Reasons []string }

func (r *Refused) Error() string {
	return "refused in service mode (a job reaches the hosts of its cluster over SSH, never the server's machine; kubexm server --allow-host-networks allows a network): " + strings.Join(r.Reasons, "; ")
}

// Register reads a cluster.yaml a client sent: parsed without the server's
// files or environment, and its hosts checked.
func (g *Guard) Register(ctx context.Context, data []byte) (*schema.Cluster, error) {
	c, _, err := validate.ParseConfined(data, g.support, g.secretExists)
	if err != nil {
		return nil, err
	}
	if err := g.CheckHosts(ctx, c); err != nil {
		return nil, err
	}
	return c, nil
}

func (g *Guard) secretExists(cluster, name string) bool {
	return g.secrets != nil && g.secrets.Usable(cluster, name)
}

// CheckJob checks a job's stored cluster.yaml again, and a command job's
// hosts: each name, pattern or group of nodes and groups must be hosts of
// the cluster (a name the file does not hold would run on the control
// machine).
func (g *Guard) CheckJob(ctx context.Context, data []byte, nodes, groups []string) (*schema.Cluster, error) {
	c, err := g.Register(ctx, data)
	if err != nil {
		return nil, err
	}
	if len(nodes) == 0 && len(groups) == 0 {
		return c, nil
	}
	inv, err := schema.Inventory(c, "")
	if err != nil {
		return nil, err
	}
	var r Refused
	for _, n := range slices.Concat(nodes, groups) {
		hosts, unknown, err := engine.MatchHosts(inv, n)
		if err != nil {
			return nil, fmt.Errorf("nodes %q: %w", n, err)
		}
		if len(unknown) > 0 {
			r.Reasons = append(r.Reasons, fmt.Sprintf("nodes %q: %s is no host of cluster %s", n, strings.Join(unknown, ", "), c.Metadata.Name))
			continue
		}
		for _, h := range hosts {
			if _, ok := inv.Host(h); !ok {
				r.Reasons = append(r.Reasons, fmt.Sprintf("nodes %q: %s is no host of cluster %s", n, h, c.Metadata.Name))
			}
		}
	}
	if len(r.Reasons) > 0 {
		return nil, &r
	}
	return c, nil
}

// CheckHosts refuses the hosts and bastions of c that are the server's
// machine or a network no job should reach from it.
func (g *Guard) CheckHosts(ctx context.Context, c *schema.Cluster) error {
	own, err := g.own()
	if err != nil {
		return err
	}
	var r Refused
	check := func(what, addr string, local bool) {
		addrs, why := g.resolve(ctx, addr)
		if why != "" {
			r.Reasons = append(r.Reasons, fmt.Sprintf("%s: address %q %s", what, addr, why))
			return
		}
		for _, a := range addrs {
			if g.allowed(a) {
				continue
			}
			if local {
				// connection: local runs on the server whatever the address.
				r.Reasons = append(r.Reasons, fmt.Sprintf("%s: connection local runs on the server's machine", what))
				return
			}
			if why := forbidden(a, own); why != "" {
				r.Reasons = append(r.Reasons, fmt.Sprintf("%s: address %s is %s", what, a, why))
				return
			}
		}
	}
	// checkIP checks an address the server's runs may connect to besides
	// SSH (the API server through a kubeconfig, a health check): an IP
	// when given, since only the hosts resolve the names there.
	checkIP := func(what, addr string) {
		for _, part := range strings.Split(addr, ",") {
			a, err := netip.ParseAddr(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			if a = a.WithZone("").Unmap(); g.allowed(a) {
				continue
			}
			if why := forbidden(a, own); why != "" {
				r.Reasons = append(r.Reasons, fmt.Sprintf("%s: address %s is %s", what, a, why))
			}
		}
	}
	for i, h := range c.Spec.Hosts {
		what := fmt.Sprintf("spec.hosts[%d] (%s)", i, h.Name)
		local := h.Connection == "local" || h.Connection == "" && isLocalName(h.Address)
		check(what, h.Address, local)
		if h.Bastion != nil {
			check(what+" bastion", h.Bastion.Address, false)
		}
		if !local {
			checkIP(what+" internalAddress", h.InternalAddress)
		}
	}
	checkIP("spec.controlPlaneEndpoint.lb_address", c.Spec.ControlPlaneEndpoint.LBAddress)
	if b := c.Spec.Bastion; b != nil {
		check("spec.bastion", b.Address, false)
	}
	if len(r.Reasons) > 0 {
		return &r
	}
	return nil
}

// Dial connects to addr (host:port of a cluster's host or bastion) for a
// job's SSH transport. The name is resolved once, here; every address it
// resolves to is checked as CheckHosts checks them, and the connection goes
// to a checked address, never to the name again: a DNS answer that changed
// since the job was checked (rebinding) cannot point the run at the
// server's machine.
func (g *Guard) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	addrs, err := g.dialAddrs(ctx, host)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{KeepAlive: 30 * time.Second}
	var errs []error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// dialAddrs resolves host for Dial and checks every address, once per
// name: a failure is not kept, so a name that did not resolve is asked
// again on the next dial.
func (g *Guard) dialAddrs(ctx context.Context, host string) ([]netip.Addr, error) {
	g.dialMu.Lock()
	addrs, ok := g.dialed[host]
	g.dialMu.Unlock()
	if ok {
		return addrs, nil
	}
	addrs, why := g.resolve(ctx, host)
	if why != "" {
		return nil, &Refused{Reasons: []string{fmt.Sprintf("address %q %s", host, why)}}
	}
	own, err := g.own()
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if g.allowed(a) {
			continue
		}
		if why := forbidden(a, own); why != "" {
			return nil, &Refused{Reasons: []string{fmt.Sprintf("address %q resolved to %s when the run connected, which is %s", host, a, why)}}
		}
	}
	g.dialMu.Lock()
	defer g.dialMu.Unlock()
	if prev, ok := g.dialed[host]; ok {
		// Another dial of the name checked it meanwhile: every
		// connection goes to the first answer checked.
		return prev, nil
	}
	if g.dialed == nil {
		g.dialed = map[string][]netip.Addr{}
	}
	g.dialed[host] = addrs
	return addrs, nil
}

func (g *Guard) allowed(a netip.Addr) bool {
	return slices.ContainsFunc(g.allow, func(p netip.Prefix) bool { return p.Contains(a) })
}

func isLocalName(addr string) bool {
	a := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(addr)), ".")
	return a == "localhost" || strings.HasSuffix(a, ".localhost")
}

// resolve turns a host's address into the addresses a dial would reach;
// why says why it cannot be checked.
func (g *Guard) resolve(ctx context.Context, addr string) ([]netip.Addr, string) {
	addr = strings.TrimSpace(addr)
	if isLocalName(addr) {
		// RFC 6761: always loopback, whatever a resolver says.
		return []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()}, ""
	}
	if a, err := netip.ParseAddr(addr); err == nil {
		return []netip.Addr{a.WithZone("").Unmap()}, ""
	}
	if addr == "" || strings.ContainsAny(addr, ":/%[] ") || strings.Trim(addr, "0123456789.") == "" || strings.HasPrefix(strings.ToLower(addr), "0x") {
		// 127.1, 2130706433, 0x7f.1: forms some resolvers take for
		// loopback and netip does not.
		return nil, "is neither an IP address nor a DNS name"
	}
	as, err := g.lookup(ctx, addr)
	if err != nil || len(as) == 0 {
		return nil, "does not resolve on the server"
	}
	out := make([]netip.Addr, len(as))
	for i, a := range as {
		out[i] = a.WithZone("").Unmap()
	}
	return out, ""
}

// forbidden says why a job must not reach a, or "".
func forbidden(a netip.Addr, own []netip.Addr) string {
	switch {
	case a.IsLoopback():
		return "loopback (the server's machine)"
	case a.IsUnspecified() || a.Is4() && a.As4()[0] == 0:
		return "unspecified (a dial reaches the server's machine)"
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return "link-local (cloud metadata services live there)"
	case a.IsMulticast() || a.IsInterfaceLocalMulticast():
		return "multicast"
	case slices.Contains(own, a):
		return "an address of the server's machine"
	}
	return ""
}
