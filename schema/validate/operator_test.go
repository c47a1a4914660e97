package validate

import (
	. "github.com/mensylisir/kubexm/schema"

	"os"
	"path/filepath"
	"strings"
	"testing"
)

// spec.operator.enabled: the controller's Secret holds one key, so every
// remote host must be reached with it (and nothing else); the inventory
// names that key's file for roles/kubexm-controller.
func TestOperatorNeedsOneKey(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	dir := t.TempDir()
	k1, k2 := filepath.Join(dir, "k1"), filepath.Join(dir, "k2")
	for _, k := range []string{k1, k2} {
		if err := os.WriteFile(k, []byte("key"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	withKeys := func(pairs ...string) string {
		s := edit(t, "{name: m1, address: 192.168.1.1}", "{name: m1, address: 192.168.1.1, privateKeyPath: "+k1+"}",
			"{name: m2, address: 192.168.1.2}", "{name: m2, address: 192.168.1.2, privateKeyPath: "+k1+"}",
			"{name: w1, address: 192.168.1.3}", "{name: w1, address: 192.168.1.3, privateKeyPath: "+k1+"}",
			"{name: lb1, address: 192.168.1.4}", "{name: lb1, address: 192.168.1.4, privateKeyPath: "+k1+"}",
			"  roleGroups:", "  operator: {enabled: true}\n  roleGroups:")
		for i := 0; i+1 < len(pairs); i += 2 {
			s = strings.Replace(s, pairs[i], pairs[i+1], 1)
		}
		return s
	}
	if ps := problemsOf(t, withKeys()); len(ps) != 0 {
		t.Fatalf("one key for every host: %v", ps)
	}
	c, _, err := parse("c.yaml", []byte(withKeys()), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := Inventory(c, "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := inv.Vars["kubexm_controller_ssh_key_file"]; got != k1 {
		t.Errorf("kubexm_controller_ssh_key_file %v, want %s", got, k1)
	}
	for _, tc := range []struct{ name, yaml, path, msg string }{
		{"another key", withKeys("w1, address: 192.168.1.3, privateKeyPath: "+k1, "w1, address: 192.168.1.3, privateKeyPath: "+k2),
			"spec.hosts[2].privateKeyPath", "another host with " + k1},
		{"a password", withKeys("privateKeyPath: "+k1+"}\n  - {name: w1", "privateKeyPath: "+k1+", password: secret}\n  - {name: w1"),
			"spec.hosts[1].password", "reached with a password"},
		{"an encrypted key", withKeys("lb1, address: 192.168.1.4, privateKeyPath: "+k1, "lb1, address: 192.168.1.4, privateKeyPassphrase: p, privateKeyPath: "+k1),
			"spec.hosts[3].privateKeyPassphrase", "encrypted key"},
		{"no key at all", withKeys("m1, address: 192.168.1.1, privateKeyPath: "+k1, "m1, address: 192.168.1.1"),
			"spec.hosts[0].privateKeyPath", "no private key"},
	} {
		ps := problemsOf(t, tc.yaml)
		if len(ps) != 1 || ps[0].Path != tc.path || !strings.Contains(ps[0].Message, tc.msg) || !strings.Contains(ps[0].Hint, "kubexm controller on the control machine") {
			t.Errorf("%s: want one problem at %s saying %q, have %+v", tc.name, tc.path, tc.msg, ps)
		}
	}
	// Without spec.operator.enabled nothing of this is asked.
	if ps := problemsOf(t, withKeys("operator: {enabled: true}", "operator: {enabled: false}", "privateKeyPath: "+k1+"}\n  - {name: w1", "privateKeyPath: "+k2+"}\n  - {name: w1")); len(ps) != 0 {
		t.Errorf("operator off: %v", ps)
	}
}

// The Cluster resource holds no empty mapping: spec.operator.enabled true,
// then false, applies spec without operator (an API server stores the {}
// that took the place of kubexm's last field of a mapping as null, which
// the CRD refuses); the sections that say something stay, in order.
func TestResourceYAMLLeavesOutEmptyMappings(t *testing.T) {
	c, _, err := parse("c.yaml", []byte(edit(t, "  roleGroups:", "  operator: {enabled: false}\n  dns: {}\n  roleGroups:")), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.ResourceYAML()
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	if strings.Contains(s, "{}") || strings.Contains(s, "operator:") || strings.Contains(s, "  dns:") {
		t.Errorf("an empty mapping in the resource:\n%s", s)
	}
	if !strings.HasPrefix(s, "apiVersion: kubexm.mensylisir.io/v1alpha1\nkind: Cluster\nmetadata:\n") || !strings.Contains(s, "\n  hosts:\n    - name: ") ||
		!strings.Contains(s, "\n  roleGroups:\n") {
		t.Errorf("the resource's order or layout changed:\n%s", s)
	}
}
