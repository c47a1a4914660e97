package validate

import (
	. "github.com/mensylisir/kubexm/schema"

	"slices"
	"strings"
	"testing"
)

// TestMaskedBySchemaFields: what issue 45's audit found in clear under
// names the heuristic missed: harbor.yml's values (a secret map by the
// schema: every value, whatever its key), and variables named pass, apikey,
// auth. A variable merely containing "auth" in a word stays.
func TestMaskedBySchemaFields(t *testing.T) {
	data := []byte(`apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata: {name: c1}
spec:
  hosts:
  - name: node1
    address: 10.0.0.5
    password: x
    vars: {pass: Pw-A-1, apikey: Pw-B-2, basic_auth: Pw-C-3, auth: Pw-D-4, kube_apiserver_authorization_mode: Node}
  roleGroups: {etcd: [node1], master: [node1], worker: [node1]}
  registry:
    harborConfig: {harborAdminPassword: Pw-E-5, database: {root: Pw-F-6}, weird_key: Pw-G-7}
`)
	c, _, err := Parse("cluster.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Marshal(c.Masked())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Pw-A-1", "Pw-B-2", "Pw-C-3", "Pw-D-4", "Pw-E-5", "Pw-F-6", "Pw-G-7"} {
		if strings.Contains(string(out), s) {
			t.Errorf("%s in the masked config:\n%s", s, out)
		}
	}
	if !strings.Contains(string(out), "authorization_mode: Node") {
		t.Errorf("a variable that is no secret was masked:\n%s", out)
	}
	inv, err := Inventory(c, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Pw-E-5", "Pw-F-6", "Pw-G-7", "Pw-A-1"} {
		if !slices.Contains(inv.Secrets(), s) {
			t.Errorf("%s is not among the secrets the engine masks in output", s)
		}
	}
}

// TestInvalidReferenceNotEchoed: a password that looks like a reference
// but is none may be the password itself: the error names the field, not
// the value (issue 45).
func TestInvalidReferenceNotEchoed(t *testing.T) {
	data := []byte(`apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata: {name: c1}
spec:
  hosts:
  - {name: node1, address: 10.0.0.5, password: "${Sekr1t pw}"}
  roleGroups: {etcd: [node1], master: [node1], worker: [node1]}
`)
	_, _, err := Parse("cluster.yaml", data)
	if err == nil || strings.Contains(err.Error(), "Sekr1t") || !strings.Contains(err.Error(), "spec.hosts[0].password") {
		t.Fatalf("%v", err)
	}
}
