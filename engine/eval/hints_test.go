package eval

import (
	"strings"
	"testing"
)

// Typos and Ansible habits get a pointer to the fix.
func TestHints(t *testing.T) {
	e := New()
	templates := map[string]string{
		`{{ .spec.etcd.dataDirr }}`:              `(did you mean "spec.etcd.dataDir"?)`,
		`{{ .spec.etcdd.dataDir }}`:              `(did you mean "spec.etcd"?)`,
		`{{ .inventory_hostnme }}`:               `(did you mean "inventory_hostname"?)`,
		`{{ inventory_hostname }}`:               `variables start with a dot: {{ .inventory_hostname }}`,
		`{{ .spec.etcd | toYml }}`:               `(did you mean "toYaml"?)`,
		`{% if x %}{{ x }}{% endif %}`:           `not Jinja`,
		`{{ index .hostvars "node1" "adress" }}`: `(did you mean "hostvars.node1.address"?)`,
	}
	for src, want := range templates {
		_, err := e.Render(src, testVars())
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Render(%q) error %v, want it to contain %q", src, err, want)
		}
	}
	exprs := map[string]string{
		`spec.etcd.dataDirr == "x"`:       `(did you mean "spec.etcd.dataDir"?)`,
		`inventory_hostnam == "a"`:        `(did you mean "inventory_hostname"?)`,
		`groups.etc`:                      `(did you mean "groups.etcd"?)`,
		`x is defined`:                    `write defined("x")`,
		`x is not defined`:                `write defined("x")`,
		`{{ x }}`:                         `without {{ }}`,
		`x | default(1)`:                  `x ?? value`,
		`x | bool`:                        `no bool filter`,
		`groups.etcd | length > 0`:        `len(x)`,
		`cidrhost("10.0.0.0/8", 1)`:       `(did you mean "cidrHost"?)`,
		`uper(inventory_hostname) == "A"`: `(did you mean "upper"?)`,
	}
	for src, want := range exprs {
		_, err := e.EvalBool(src, testVars())
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("EvalBool(%q) error %v, want it to contain %q", src, err, want)
		}
	}
	// Nothing close: no suggestion.
	_, err := e.Eval(`zzzzqqq`, testVars())
	if err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("unexpected suggestion: %v", err)
	}
}

func TestNoFarFetchedSuggestion(t *testing.T) {
	e := New()
	vars := map[string]any{"role": "x"}
	_, err := e.Render("{{ .nope }}", vars)
	if err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Fatalf("Render error %v: suggestion for an unrelated name", err)
	}
}
