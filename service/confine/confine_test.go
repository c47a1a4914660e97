package confine

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mensylisir/kubexm/schema"
	"github.com/mensylisir/kubexm/service/secretbox"
)

func cluster(hosts string) []byte {
	return []byte(`apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata: {name: c1}
spec:
  hosts:
` + hosts + `
  roleGroups: {etcd: [node1], master: [node1], worker: [node1]}
`)
}

func testGuard(t *testing.T, allow ...string) (*Guard, *Secrets) {
	t.Helper()
	box, _ := secretbox.New(bytes.Repeat([]byte{5}, 32))
	sec := NewSecrets(t.TempDir(), box)
	g, err := New(Config{Allow: allow, Secrets: sec})
	if err != nil {
		t.Fatal(err)
	}
	g.own = func() ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("192.0.2.10")}, nil
	}
	g.lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "me.example":
			return []netip.Addr{netip.MustParseAddr("192.0.2.10")}, nil
		case "loop.example":
			return []netip.Addr{netip.MustParseAddr("10.0.0.9"), netip.MustParseAddr("127.0.0.2")}, nil
		case "node.example":
			return []netip.Addr{netip.MustParseAddr("10.0.0.9")}, nil
		}
		return nil, errors.New("no such host")
	}
	return g, sec
}

// TestServiceHostsRefused: every address that reaches the server's machine
// (or its metadata service) is refused at registration, by name or number,
// unless its network is allowed.
func TestServiceHostsRefused(t *testing.T) {
	g, _ := testGuard(t)
	ctx := context.Background()
	for name, host := range map[string]string{
		"localhost":            `  - {name: node1, address: localhost, password: x}`,
		"LOCALHOST.":           `  - {name: node1, address: LOCALHOST., password: x}`,
		"a.localhost":          `  - {name: node1, address: db.localhost, password: x}`,
		"loopback":             `  - {name: node1, address: 127.0.0.1, password: x}`,
		"loopback 127.8.9.10":  `  - {name: node1, address: 127.8.9.10, password: x}`,
		"127.1":                `  - {name: node1, address: "127.1", password: x}`,
		"decimal":              `  - {name: node1, address: "2130706433", password: x}`,
		"ipv6 loopback":        `  - {name: node1, address: "::1", password: x}`,
		"v4-mapped loopback":   `  - {name: node1, address: "::ffff:127.0.0.1", password: x}`,
		"unspecified":          `  - {name: node1, address: 0.0.0.0, password: x}`,
		"this network":         `  - {name: node1, address: 0.1.2.3, password: x}`,
		"link-local metadata":  `  - {name: node1, address: 169.254.169.254, password: x}`,
		"ipv6 link-local":      `  - {name: node1, address: "fe80::1", password: x}`,
		"own address":          `  - {name: node1, address: 192.0.2.10, password: x}`,
		"name of own address":  `  - {name: node1, address: me.example, password: x}`,
		"name with a loopback": `  - {name: node1, address: loop.example, password: x}`,
		"unresolvable":         `  - {name: node1, address: nowhere.example, password: x}`,
		"connection local":     `  - {name: node1, address: 10.0.0.5, connection: local}`,
		"bastion loopback":     `  - {name: node1, address: 10.0.0.5, password: x, bastion: {address: 127.0.0.1, password: y}}`,
		"internal loopback":    `  - {name: node1, address: 10.0.0.5, internalAddress: 127.0.0.1, password: x}`,
		"internal own":         `  - {name: node1, address: 10.0.0.5, internalAddress: 192.0.2.10, password: x}`,
		"endpoint metadata":    "  - {name: node1, address: 10.0.0.5, password: x}\n  controlPlaneEndpoint: {externalLoadBalancer: external, lb_address: 169.254.169.254}",
	} {
		// Refused by the policy, or (127.1, LOCALHOST.) already by the
		// schema as no address.
		if _, err := g.Register(ctx, cluster(host)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for name, host := range map[string]string{
		"an address":   `  - {name: node1, address: 10.0.0.5, password: x}`,
		"a name":       `  - {name: node1, address: node.example, password: x}`,
		"with bastion": `  - {name: node1, address: 10.0.0.5, password: x, bastion: {address: 10.0.0.1, password: y}}`,
	} {
		if _, err := g.Register(ctx, cluster(host)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Allowed networks: loopback hosts and connection: local in them.
	lab, _ := testGuard(t, "127.0.0.0/8", "::1", "10.0.0.5")
	for _, host := range []string{
		`  - {name: node1, address: 127.0.0.1, connection: local}`,
		`  - {name: node1, address: 10.0.0.5, connection: local}`,
		`  - {name: node1, address: localhost}`,
	} {
		if _, err := lab.Register(ctx, cluster(host)); err != nil {
			t.Errorf("allowed %s: %v", host, err)
		}
	}
	if _, err := lab.Register(ctx, cluster(`  - {name: node1, address: 10.0.0.6, connection: local}`)); err == nil {
		t.Error("connection: local outside the allowed networks was accepted")
	}
	if _, err := New(Config{Allow: []string{"10.0.0.0/33"}}); err == nil {
		t.Error("a bad --allow-host-networks was accepted")
	}
}

// TestServiceFilesAndEnvRefused: a cluster.yaml through the API names no
// file or variable of the server; the answer does not depend on whether the
// file or variable exists.
func TestServiceFilesAndEnvRefused(t *testing.T) {
	g, _ := testGuard(t)
	ctx := context.Background()
	existing, missing := t.TempDir()+"/key", "/nonexistent/kubexm/key"
	if err := os.WriteFile(existing, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBEXM_TEST_SET_VAR", "value-of-the-server")
	pairs := map[string][2]string{
		"passwordFile":   {`  - {name: node1, address: 10.0.0.5, passwordFile: ` + existing + `}`, `  - {name: node1, address: 10.0.0.5, passwordFile: ` + missing + `}`},
		"privateKeyPath": {`  - {name: node1, address: 10.0.0.5, privateKeyPath: ` + existing + `}`, `  - {name: node1, address: 10.0.0.5, privateKeyPath: ` + missing + `}`},
		"${ENV}":         {`  - {name: node1, address: 10.0.0.5, password: "${KUBEXM_TEST_SET_VAR}"}`, `  - {name: node1, address: 10.0.0.5, password: "${KUBEXM_TEST_UNSET_VAR}"}`},
		"bastion key":    {`  - {name: node1, address: 10.0.0.5, password: x, bastion: {address: 10.0.0.1, privateKeyPath: ` + existing + `}}`, `  - {name: node1, address: 10.0.0.5, password: x, bastion: {address: 10.0.0.1, privateKeyPath: ` + missing + `}}`},
		"hook":           {`  - {name: node1, address: 10.0.0.5, password: x}` + "\n  hooks: [{playbook: create-cluster, phase: network, when: before, file: " + existing + "}]", `  - {name: node1, address: 10.0.0.5, password: x}` + "\n  hooks: [{playbook: create-cluster, phase: network, when: before, file: " + missing + "}]"},
		"bad reference":  {`  - {name: node1, address: 10.0.0.5, password: "${not valid-Sekr1t}"}`, `  - {name: node1, address: 10.0.0.5, password: "${also not valid}"}`},
	}
	for name, p := range pairs {
		_, err1 := g.Register(ctx, cluster(p[0]))
		_, err2 := g.Register(ctx, cluster(p[1]))
		if err1 == nil || err2 == nil {
			t.Errorf("%s: accepted (%v, %v)", name, err1, err2)
			continue
		}
		norm := func(err error) string {
			return strings.NewReplacer(existing, "PATH", missing, "PATH", "KUBEXM_TEST_SET_VAR", "VAR", "KUBEXM_TEST_UNSET_VAR", "VAR",
				"not valid-Sekr1t", "X", "also not valid", "X").Replace(err.Error())
		}
		if norm(err1) != norm(err2) {
			t.Errorf("%s: the answer tells whether it exists:\n%v\n%v", name, err1, err2)
		}
		if strings.Contains(err1.Error(), "value-of-the-server") || strings.Contains(err1.Error(), "Sekr1t") || !strings.Contains(err1.Error(), "not allowed through the API") {
			t.Errorf("%s: %v", name, err1)
		}
	}
	// Files elsewhere in the schema.
	for name, extra := range map[string]string{
		"addon manifests": "\n  addons: [{name: mine, sources: {yaml: {path: [/etc/passwd]}}}]",
		"addon chart":     "\n  addons: [{name: mine, sources: {chart: {path: /etc}}}]",
		"registry certs":  "\n  registry: {auths: {r.example: {username: u, password: p, certsPath: /etc}}}",
		"registry pwfile": "\n  registry: {auths: {r.example: {username: u, passwordFile: /etc/shadow}}}",
	} {
		if _, err := g.Register(ctx, cluster(`  - {name: node1, address: 10.0.0.5, password: x}`+extra)); err == nil || !strings.Contains(err.Error(), "not allowed through the API") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestServiceSecretReferences: ${secret:NAME} names a server secret; the
// worker's copy of the file holds the password, and the key as a
// descriptor of its own; an unknown secret is refused.
func TestServiceSecretReferences(t *testing.T) {
	g, sec := testGuard(t)
	ctx := context.Background()
	if err := sec.Put("pw", []byte(`p"w: Sekr1t`), []string{"c1"}); err != nil {
		t.Fatal(err)
	}
	if err := sec.Put("key", []byte("-----BEGIN KEY-----\nabc\n"), nil); err != nil {
		t.Fatal(err)
	}
	data := cluster(`  - {name: node1, address: 10.0.0.5, password: "${secret:pw}", privateKeyPath: "${secret:key}"}
  - name: node2
    address: 10.0.0.6
    sudoPassword: ${secret:pw}
    privateKeyPath: '${secret:key}'
    vars: {note: "${secret:pw}"}`)
	if _, err := g.Register(ctx, data); err != nil {
		t.Fatal(err)
	}
	p, err := g.Prepare(ctx, data, nil, nil, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, _, err := schema.Decode("cluster.yaml", p.Config)
	if err != nil {
		t.Fatalf("%v\n%s", err, p.Config)
	}
	h1, h2 := c.Spec.Hosts[0], c.Spec.Hosts[1]
	if h1.Password != `p"w: Sekr1t` || h2.SudoPassword != `p"w: Sekr1t` || h1.PrivateKeyPath != "/dev/fd/5" || h2.PrivateKeyPath != "/dev/fd/5" || len(p.Files) != 1 {
		t.Fatalf("prepared:\n%s", p.Config)
	}
	if h2.Vars["note"] != "${secret:pw}" {
		t.Errorf("a reference outside a secret field was resolved: %v", h2.Vars["note"])
	}
	key := make([]byte, 100)
	n, _ := p.Files[0].ReadAt(key, 0)
	if string(key[:n]) != "-----BEGIN KEY-----\nabc\n" {
		t.Errorf("key file: %q", key[:n])
	}
	view, err := g.ForView(ctx, data)
	if err != nil || bytes.Contains(view, []byte("Sekr1t")) {
		t.Errorf("view: %v\n%s", err, view)
	}
	if _, err := g.Register(ctx, cluster(`  - {name: node1, address: 10.0.0.5, password: "${secret:nope}"}`)); err == nil || !strings.Contains(err.Error(), `no server secret "nope"`) {
		t.Errorf("unknown secret: %v", err)
	}
	if err := sec.Delete("pw"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Prepare(ctx, data, nil, nil, 5); err == nil {
		t.Error("a job naming a deleted secret was prepared")
	}
	if list, _ := sec.List(); len(list) != 1 || list[0].Name != "key" || list[0].Value != nil {
		t.Errorf("list: %+v", list)
	}
}

// TestServiceSecretScopes: a secret is for the clusters it was made for. A
// file of another cluster naming it is refused at registration and on the
// worker with the words a secret that does not exist gets; a secret
// re-scoped after a cluster registered is refused to that cluster's next
// job; one made before scoping (sealed without clusters) stays usable by
// every cluster, and says so.
func TestServiceSecretScopes(t *testing.T) {
	g, sec := testGuard(t)
	ctx := context.Background()
	named := func(name, secret string) []byte {
		return []byte(strings.Replace(string(cluster(`  - {name: node1, address: 10.0.0.5, password: "${secret:`+secret+`}"}`)), "name: c1", "name: "+name, 1))
	}
	if err := sec.Put("lab-pw", []byte("Sekr1t-lab"), []string{"lab", "lab2", "lab"}); err != nil {
		t.Fatal(err)
	}
	if err := sec.Put("bad", []byte("x"), []string{"../x"}); err == nil {
		t.Error("a secret for cluster ../x was stored")
	}
	for _, c := range []string{"lab", "lab2"} {
		if _, err := g.Register(ctx, named(c, "lab-pw")); err != nil {
			t.Errorf("cluster %s naming its secret: %v", c, err)
		}
	}
	_, outOfScope := g.Register(ctx, named("other", "lab-pw"))
	_, missing := g.Register(ctx, named("other", "nope"))
	if outOfScope == nil || missing == nil {
		t.Fatalf("cluster other naming lab's secret: %v; an unknown one: %v", outOfScope, missing)
	}
	if a, b := strings.ReplaceAll(outOfScope.Error(), "lab-pw", "NAME"), strings.ReplaceAll(missing.Error(), "nope", "NAME"); a != b {
		t.Errorf("a secret of other clusters and one that does not exist are told apart:\n%s\n%s", a, b)
	}
	if _, err := g.Prepare(ctx, named("other", "lab-pw"), nil, nil, 5); err == nil || strings.Contains(err.Error(), "Sekr1t") {
		t.Errorf("the worker prepared another cluster's job naming lab's secret: %v", err)
	}
	p, err := g.Prepare(ctx, named("lab", "lab-pw"), nil, nil, 5)
	if err != nil || !strings.Contains(string(p.Config), "Sekr1t-lab") {
		t.Fatalf("lab's job: %v", err)
	}
	// Re-scoped to lab2 only: lab's stored file is refused at its next job.
	if err := sec.Put("lab-pw", []byte("Sekr1t-lab"), []string{"lab2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Prepare(ctx, named("lab", "lab-pw"), nil, nil, 5); err == nil || !strings.Contains(err.Error(), `no server secret "lab-pw" for cluster lab`) {
		t.Errorf("lab's job after the secret was re-scoped: %v", err)
	}
	// A secret of the format before scoping: every cluster.
	box, _ := secretbox.New(bytes.Repeat([]byte{5}, 32))
	sealed, err := box.Seal([]byte("old-pw"), []byte("secret/old"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sec.dir, "old"), sealed, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"lab", "other"} {
		if p, err := g.Prepare(ctx, named(c, "old"), nil, nil, 5); err != nil || !strings.Contains(string(p.Config), "old-pw") {
			t.Errorf("cluster %s naming a secret made before scoping: %v", c, err)
		}
	}
	if err := sec.Put("shared", []byte("pw"), nil); err != nil {
		t.Fatal(err)
	}
	list, err := sec.List()
	if err != nil || len(list) != 3 {
		t.Fatalf("list: %+v %v", list, err)
	}
	want := []Secret{{Name: "lab-pw", Clusters: []string{"lab2"}}, {Name: "old", Unscoped: true}, {Name: "shared"}}
	for i, w := range want {
		if l := list[i]; l.Name != w.Name || l.Unscoped != w.Unscoped || !slices.Equal(l.Clusters, w.Clusters) || l.Value != nil {
			t.Errorf("list[%d] = %+v, want %+v", i, l, w)
		}
	}
	// A sealed file copied under another name opens as neither.
	if err := os.WriteFile(filepath.Join(sec.dir, "copy"), sealed, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := sec.Get("copy"); err == nil {
		t.Error("a secret copied under another name opened")
	}
}

// TestServiceCommandNodes: a command job's nodes are hosts of its cluster:
// localhost, which the file does not name, would be the server.
func TestServiceCommandNodes(t *testing.T) {
	g, _ := testGuard(t)
	ctx := context.Background()
	data := cluster(`  - {name: node1, address: 10.0.0.5, password: x}
  - {name: node2, address: 10.0.0.6, password: x}`)
	for _, ok := range [][]string{{"all"}, {"node1"}, {"node*"}, {"node1", "node2"}} {
		if _, err := g.CheckJob(ctx, data, ok, nil); err != nil {
			t.Errorf("nodes %v: %v", ok, err)
		}
	}
	for _, bad := range [][]string{{"localhost"}, {"127.0.0.1"}, {"node1", "localhost"}, {"10.0.0.5"}} {
		if _, err := g.CheckJob(ctx, data, bad, nil); err == nil {
			t.Errorf("nodes %v: accepted", bad)
		}
		if _, err := g.CheckJob(ctx, data, nil, bad); err == nil {
			t.Errorf("groups %v: accepted", bad)
		}
	}
	for _, ok := range [][]string{{"master"}, {"worker", "etcd"}, {"master[0]"}} {
		if _, err := g.CheckJob(ctx, data, nil, ok); err != nil {
			t.Errorf("groups %v: %v", ok, err)
		}
	}
}

// TestServiceDialRebinding: a host name whose DNS answer changes between
// the job's check and the SSH dial (rebinding: a permitted address, then
// 127.0.0.1) is refused at the dial, before any connection; the dial
// resolves once and connects to the address it checked.
func TestServiceDialRebinding(t *testing.T) {
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip("no loopback:", err)
	}
	defer l.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)

	g, _ := testGuard(t)
	var lookups atomic.Int32
	g.lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
		if host != "rebind.example" {
			return nil, errors.New("no such host")
		}
		if lookups.Add(1) == 1 {
			return []netip.Addr{netip.MustParseAddr("10.0.0.5")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	if _, err := g.Register(ctx, cluster(`  - {name: node1, address: rebind.example, password: x}`)); err != nil {
		t.Fatalf("the check, while the name answers 10.0.0.5: %v", err)
	}
	_, err = g.Dial(ctx, "tcp", net.JoinHostPort("rebind.example", port))
	var r *Refused
	if !errors.As(err, &r) || !strings.Contains(err.Error(), `"rebind.example" resolved to 127.0.0.1 when the run connected`) || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("the dial, once the name answers 127.0.0.1: %v", err)
	}
	for _, a := range []string{"127.0.0.1", "localhost", "[::1]", "0.0.0.0"} {
		if _, err := g.Dial(ctx, "tcp", a+":"+port); !errors.As(err, &r) {
			t.Errorf("dial %s: %v, want refused", a, err)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("%d connections reached the server's machine", n)
	}

	// Allowed: the dial connects to the address it resolved and checked,
	// resolving the name once.
	allowed, _ := testGuard(t, "127.0.0.1/32")
	lookups.Store(0)
	allowed.lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
		lookups.Add(1)
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	c, err := allowed.Dial(ctx, "tcp", net.JoinHostPort("lab.example", port))
	if err != nil {
		t.Fatalf("dial of an allowed address: %v", err)
	}
	if got := c.RemoteAddr().String(); got != "127.0.0.1:"+port || lookups.Load() != 1 {
		t.Errorf("connected to %s after %d lookups; want 127.0.0.1:%s after 1", got, lookups.Load(), port)
	}
	c.Close()
	// A reconnect, or another host behind the same bastion, dials the
	// name again: no second lookup.
	if c, err = allowed.Dial(ctx, "tcp", net.JoinHostPort("lab.example", port)); err != nil {
		t.Fatalf("second dial: %v", err)
	}
	c.Close()
	if n := lookups.Load(); n != 1 {
		t.Errorf("%d lookups for two dials of one name, want 1", n)
	}
}

func TestSecretScope(t *testing.T) {
	for sec, want := range map[*Secret]string{
		{Clusters: []string{"a", "b"}}: "cluster a, b",
		{}:                             "every cluster",
		{Unscoped: true}:               "every cluster (unscoped: made before secrets were scoped; create it again with --cluster)",
	} {
		if got := sec.Scope(); got != want {
			t.Errorf("%+v: %q, want %q", *sec, got, want)
		}
	}
}
