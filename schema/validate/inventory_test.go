package validate

import (
	. "github.com/mensylisir/kubexm/schema"

	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestInventoryFromFullExample(t *testing.T) {
	home := fakeHome(t)
	c, _, err := LoadWith("../testdata/cluster-full.yaml", permissive)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := Inventory(c, "")
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("../testdata/cluster-full.yaml")
	if inv.Source != abs || inv.Vars["cluster_file"] != abs || inv.Vars["cluster_name"] != "mycluster" {
		t.Errorf("source %q vars %v", inv.Source, inv.Vars["cluster_file"])
	}
	if !slices.Contains(inv.Secrets(), "***") {
		t.Errorf("the registry password is not among the secrets to mask: %q", inv.Secrets())
	}
	groups := map[string]string{
		"etcd":          "node1,node2,node3",
		"master":        "node4,node5,node6",
		"control_plane": "node4,node5,node6",
		"worker":        "node7,node8,node9,node10",
		"registry":      "node11",
		"loadbalancer":  "node12,node13",
		"k8s_cluster":   "node4,node5,node6,node7,node8,node9,node10",
		"all":           "node1,node2,node3,node4,node5,node6,node7,node8,node9,node10,node11,node12,node13",
	}
	for g, want := range groups {
		if got := strings.Join(inv.Groups[g], ","); got != want {
			t.Errorf("group %s = %s, want %s", g, got, want)
		}
	}
	n1, _ := inv.Host("node1")
	if n1.Address != "172.16.0.2" || n1.Port != 8022 || n1.User != "ubuntu" || n1.Password != "Qcloud@123" || n1.Local {
		t.Errorf("node1 = %+v", n1)
	}
	if n1.Vars["internal_address"] != "172.16.0.2" || n1.Vars["internal_address_v6"] != "2022::2" || n1.Vars["arch"] != "amd64" {
		t.Errorf("node1 vars = %v", n1.Vars)
	}
	if !reflect.DeepEqual(n1.Vars["roles"], []any{"etcd"}) {
		t.Errorf("node1 roles = %v", n1.Vars["roles"])
	}
	n3, _ := inv.Host("node3")
	if !strings.Contains(n3.CredentialsHint, "privateKeyPath") || !strings.Contains(n3.CredentialsHint, "cluster.yaml") {
		t.Errorf("node3's credentials hint %q names no cluster.yaml field", n3.CredentialsHint)
	}
	if n3.PrivateKeyPath != filepath.Join(home, ".ssh/id_rsa") || n3.Port != 22 || n3.User != "root" {
		t.Errorf("node3 = %+v", n3)
	}
	n2, _ := inv.Host("node2")
	if !reflect.DeepEqual(n2.Vars["labels"], map[string]any{"disk": "SSD", "role": "backend"}) {
		t.Errorf("node2 labels = %v", n2.Vars["labels"])
	}
	spec := inv.Vars["spec"].(map[string]any)
	k8s := spec["kubernetes"].(map[string]any)
	etcd := spec["etcd"].(map[string]any)
	if k8s["version"] != "v1.37.2" || etcd["type"] != "kubexm" || etcd["maxWals"] != 5 {
		t.Errorf("spec vars: %v %v", k8s["version"], etcd)
	}
	// Unset blocks are present and empty, so roles need no guards.
	if ext := etcd["external"].(map[string]any); !reflect.DeepEqual(ext["endpoints"], []any{}) {
		t.Errorf("etcd.external = %#v", ext)
	}
	for _, h := range spec["hosts"].([]any) {
		if _, ok := h.(map[string]any)["password"]; ok {
			t.Fatal("host password in spec vars")
		}
	}
	for _, h := range c.Spec.Hosts {
		if h.Password != "" && !slices.Contains(inv.Secrets(), h.Password) {
			t.Errorf("%s: password not among the secrets to mask", h.Name)
		}
	}
}

func TestInventoryLocalhost(t *testing.T) {
	t.Setenv("HOME", t.TempDir()) // no ~/.ssh/id_rsa
	y := `apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata: {name: aio}
spec:
  hosts:
  - {name: node1, address: localhost, arch: arm64}
  - {name: node2, address: 10.0.0.2, connection: local, internalAddress: "fd00::2"}
  roleGroups: {etcd: [node1], master: [node1], worker: [node1, node2]}
`
	c, _, err := parse("aio.yaml", []byte(y), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := Inventory(c, "custom")
	if err != nil {
		t.Fatal(err)
	}
	if inv.Source != "custom" {
		t.Errorf("source = %s", inv.Source)
	}
	h1, h2 := inv.Hosts[0], inv.Hosts[1]
	if !h1.Local || !h2.Local || h1.PrivateKeyPath != "" {
		t.Errorf("hosts = %+v %+v", h1, h2)
	}
	if h1.Vars["internal_address"] != "localhost" || h1.Vars["arch"] != "arm64" {
		t.Errorf("node1 vars = %v", h1.Vars)
	}
	if h2.Vars["internal_address"] != "fd00::2" || h2.Vars["internal_address_v6"] != nil {
		t.Errorf("IPv6-only node2 vars = %v", h2.Vars)
	}
	if !reflect.DeepEqual(h1.Vars["roles"], []any{"etcd", "master", "worker"}) {
		t.Errorf("roles = %v", h1.Vars["roles"])
	}
	if got := inv.Groups["registry"]; got == nil || len(got) != 0 {
		t.Errorf("empty group registry = %#v, want present and empty", got)
	}
}

func TestInventoryBadRange(t *testing.T) {
	c := &Cluster{Metadata: Metadata{Name: "x"}, Spec: Spec{RoleGroups: RoleGroups{Master: []string{"n[2:1]"}}}}
	if _, err := Inventory(c, ""); err == nil || !strings.Contains(err.Error(), "greater than end") {
		t.Errorf("err = %v", err)
	}
}

func TestInventoryBastionAndSudo(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	y := `apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata: {name: jump}
spec:
  bastion: {address: jump.example.com, user: ops, password: "${JUMP_PW}", privateKeyPath: JUMPKEY, privateKeyPassphrase: "${JUMP_KEY_PW}"}
  hosts:
  - {name: node1, address: 10.0.0.1, user: admin, password: pw1, privateKeyPassphrase: "${KEY_PW}"}
  - {name: node2, address: 10.0.0.2, user: admin, password: pw2, sudoPassword: sudo2, bastion: {address: 10.9.9.9, port: 2222}}
  roleGroups: {etcd: [node1], master: [node1], worker: [node2]}
`
	jumpKey := filepath.Join(t.TempDir(), "jump")
	os.WriteFile(jumpKey, []byte("key"), 0o600)
	y = strings.Replace(y, "JUMPKEY", jumpKey, 1)
	env := map[string]string{"JUMP_PW": "jumpsecret", "KEY_PW": "keysecret", "JUMP_KEY_PW": "jumpkeysecret"}
	c, _, err := parse("jump.yaml", []byte(y), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	inv, err := Inventory(c, "")
	if err != nil {
		t.Fatal(err)
	}
	h1, h2 := inv.Hosts[0], inv.Hosts[1]
	if h1.Bastion == nil || h1.Bastion.Address != "jump.example.com" || h1.Bastion.Port != 22 || h1.Bastion.User != "ops" || h1.Bastion.Password != "jumpsecret" {
		t.Errorf("node1 bastion from spec.bastion = %+v", h1.Bastion)
	}
	// The bastion's own encrypted key has its own passphrase.
	if h1.Bastion.PrivateKeyPath != jumpKey || h1.Bastion.Passphrase != "jumpkeysecret" {
		t.Errorf("node1 bastion key %q passphrase %q", h1.Bastion.PrivateKeyPath, h1.Bastion.Passphrase)
	}
	if h1.Passphrase != "keysecret" || h1.BecomePassword != "pw1" {
		t.Errorf("node1 passphrase %q, sudo password %q (want the login password)", h1.Passphrase, h1.BecomePassword)
	}
	if h2.Bastion == nil || h2.Bastion.Address != "10.9.9.9" || h2.Bastion.Port != 2222 || h2.Bastion.User != "admin" || h2.BecomePassword != "sudo2" {
		t.Errorf("node2 = %+v bastion %+v", h2, h2.Bastion)
	}
	for _, s := range []string{"jumpsecret", "keysecret", "sudo2", "pw1", "pw2", "jumpkeysecret"} {
		if !slices.Contains(inv.Secrets(), s) {
			t.Errorf("%q is not masked", s)
		}
	}
	out, err := Marshal(c.Masked())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"jumpsecret", "keysecret", "sudo2", "pw1"} {
		if strings.Contains(string(out), s) || strings.Contains(fmt.Sprint(inv.Vars), s) {
			t.Errorf("config view shows %q:\n%s", s, out)
		}
	}

	bad := strings.Replace(y, "bastion: {address: 10.9.9.9, port: 2222}", "bastion: {port: 70000}", 1)
	_, _, err = parse("jump.yaml", []byte(bad), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err == nil || !strings.Contains(err.Error(), "spec.hosts[1].bastion.address") || !strings.Contains(err.Error(), "70000") {
		t.Errorf("bad bastion: %v", err)
	}
}

// The spec variables reach every template; connection secrets must not be
// among them (they travel, masked, in inventory.Host).
func TestInventorySpecVarsHoldNoConnectionSecrets(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	y := `apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata: {name: jump}
spec:
  bastion: {address: jump.example.com, user: ops, password: jumpsecret}
  hosts:
  - {name: node1, address: 10.0.0.1, user: admin, password: pw1, privateKeyPassphrase: keysecret}
  - {name: node2, address: 10.0.0.2, user: admin, password: pw2, sudoPassword: sudo2, bastion: {address: 10.9.9.9, password: hostjump}}
  roleGroups: {etcd: [node1], master: [node1], worker: [node2]}
`
	c, _, err := parse("jump.yaml", []byte(y), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := Inventory(c, "")
	if err != nil {
		t.Fatal(err)
	}
	dump := fmt.Sprintf("%v", inv.Vars["spec"])
	for _, s := range []string{"jumpsecret", "keysecret", "sudo2", "hostjump", "pw1", "pw2"} {
		if strings.Contains(dump, s) {
			t.Errorf("spec variables carry the secret %q: %s", s, dump)
		}
	}
	spec := inv.Vars["spec"].(map[string]any)
	if b := spec["bastion"].(map[string]any); b["address"] != "jump.example.com" {
		t.Errorf("spec.bastion lost its address: %v", b)
	}
	h2 := spec["hosts"].([]any)[1].(map[string]any)
	if h2["user"] != "admin" || h2["bastion"].(map[string]any)["address"] != "10.9.9.9" {
		t.Errorf("host vars lost non-secret fields: %v", h2)
	}
	if h := inv.Hosts[1]; h.BecomePassword != "sudo2" || h.Bastion == nil || h.Bastion.Password != "hostjump" {
		t.Errorf("connection settings lost the secrets: %+v %+v", h, h.Bastion)
	}
}
