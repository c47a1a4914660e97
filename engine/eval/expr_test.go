package eval

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestEval(t *testing.T) {
	tests := []struct {
		src  string
		want any
	}{
		{`inventory_hostname == "node1"`, true},
		{`inventory_hostname == "node1" and inventory_hostname in groups.etcd`, true},
		{`inventory_hostname in groups.etcd && not ("node4" in groups.etcd)`, true},
		{`"etcd" in groups`, true},
		{`spec.replicas == 3`, true}, // uint64 from YAML against an int literal
		{`spec.replicas > 2 or false`, true},
		{`spec.kubernetes.version startsWith "v1.30"`, true},
		{`spec.kubernetes.version matches "^v1\\.3[0-9]"`, true},
		{`spec.etcd.dataDir contains "etcd"`, true},
		{`len(groups.etcd)`, 3},
		{`groups.etcd[0]`, "node1"},
		{`groups.etcd[-1]`, "node3"},
		{`groups["etcd"][1]`, "node2"},
		{`hostvars[inventory_hostname].address`, "10.0.0.1"},
		{`hostvars["node2.example.com"].address`, "10.0.0.2"},
		{`spec.labels.zone`, "a"},
		{`spec.empty == nil`, true},
		{`item.name + ":" + string(item.port)`, "kubelet:10250"},
		{`filter(groups.all, # not in groups.etcd)`, []any{"node4"}},
		{`map(list, .name)`, []any{"a", "b"}},
		{`any(list, .name == "b")`, true},
		{`let e = spec.etcd; e.dataDir + "/member"`, "/var/lib/etcd/member"},
		{`spec.etcd.enabled ? "on" : "off"`, "on"},
		{`$env["inventory_hostname"]`, "node1"},
		// Undefined is tolerated only where the user asks for it.
		{`spec.etcd.nope ?? "dflt"`, "dflt"},
		{`nope.at.all ?? "dflt"`, "dflt"},
		{`nope ?? also_nope ?? 7`, 7},
		{`spec?.nope?.deeper`, nil},
		{`defined("spec.etcd.dataDir")`, true},
		{`defined("spec.etcd.nope")`, false},
		{`defined("groups.etcd.2")`, true},
		{`defined("groups.etcd.9")`, false},
		{`defined("hostvars", inventory_hostname, "address")`, true},
		{`defined("hostvars", "node2.example.com", "address")`, true},
		{`defined("nope") and nope > 1`, false}, // short-circuit skips the lookup
		{`not defined("nope") or nope > 1`, true},
		{`cidrHost(spec.network.serviceCIDR, 1)`, "10.96.0.1"},
		{`cidrHost("fd00:10:96::/108", 10)`, "fd00:10:96::a"},
		{`cidrContains(spec.network.serviceCIDR, "10.100.0.1")`, true},
		{`ipFamily(hostvars.node1.address)`, "IPv4"},
		{`joinHostPort(hostvars.node1.address, 6443)`, "10.0.0.1:6443"},
		{`semverCompare(">=1.29", spec.kubernetes.version)`, true},
		{`versionAtLeast(spec.kubernetes.version, "1.31")`, false},
		{`toYaml(spec.etcd)`, "dataDir: /var/lib/etcd\nenabled: true"},
		{`fromYaml("a: [1, 2]").a[1]`, uint64(2)},
		{`upper(inventory_hostname)`, "NODE1"},
		{`inventory_hostname | upper()`, "NODE1"},
	}
	e := New()
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			got, err := e.Eval(tt.src, testVars())
			if err != nil {
				t.Fatalf("Eval(%q): %v", tt.src, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Eval(%q) = %#v (%T), want %#v (%T)", tt.src, got, got, tt.want, tt.want)
			}
		})
	}
}

func TestEvalErrors(t *testing.T) {
	tests := []struct {
		src     string
		missing string
		msg     string
	}{
		{`foo == 1`, "foo", `undefined variable "foo" in expression "foo == 1"`},
		{`spec.etcd.dataDirr == "x"`, "spec.etcd.dataDirr", `undefined variable "spec.etcd.dataDirr"`},
		{`hostvars[inventory_hostname].addr`, "hostvars.node1.addr", ""},
		{`hostvars[nope]`, "nope", ""}, // a computed key is never lenient
		{`hostvars[nope] ?? 1`, "nope", ""},
		{`groups.etcd[5]`, "groups.etcd[5]", ""},
		{`spec.empty.x`, "spec.empty.x", ""},
		{`map(list, .extra)`, "#.extra", ""},
		{`let e = spec.etcd; e.nope`, "e.nope", ""},
		{`true and nope`, "nope", ""},
		{`frobnicate(1)`, "", "unknown function frobnicate"},
		{`$get("", $env, "x")`, "", "unknown function $get"},
		{`1 +`, "", "unexpected token"},
		{`inventory_hostname.x`, "", "cannot read x"},
		{`cidrHost("nonsense", 1)`, "", "cidrHost"},
		{`cidrHost(1, 1)`, "", "argument 1 must be a string"},
		{`defined(1)`, "", "must be a string"},
		{`cidrHost("10.0.0.0/8")`, "", "want 2 arguments, got 1"},
		{`ipFamily(1)`, "", "argument 1 must be a string, got int"},
		{`toYaml()`, "", "want 1 arguments"},
		{`defined()`, "", "defined"},
		{``, "", "expression"},
	}
	e := New()
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			_, err := e.Eval(tt.src, testVars())
			if err == nil {
				t.Fatalf("Eval(%q): no error", tt.src)
			}
			var ee *Error
			if !errors.As(err, &ee) {
				t.Fatalf("error %T is not *Error: %v", err, err)
			}
			if ee.Kind != "expression" || ee.Source != tt.src {
				t.Errorf("Kind=%q Source=%q", ee.Kind, ee.Source)
			}
			if ee.Missing != tt.missing {
				t.Errorf("Missing = %q, want %q (%v)", ee.Missing, tt.missing, err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not contain %q", err, tt.msg)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}

func TestEvalBool(t *testing.T) {
	e := New()
	ok, err := e.EvalBool(`inventory_hostname in groups.etcd`, testVars())
	if err != nil || !ok {
		t.Fatalf("EvalBool = %v, %v", ok, err)
	}
	for src, typ := range map[string]string{
		`inventory_hostname`: "string",
		`groups.etcd`:        "list",
		`spec.empty`:         "nil",
		`spec.replicas`:      "int",
		`spec.etcd`:          "map",
	} {
		_, err := e.EvalBool(src, testVars())
		var ee *Error
		if !errors.As(err, &ee) || ee.Kind != "expression" {
			t.Fatalf("EvalBool(%q) error = %v, want *Error", src, err)
		}
		if !strings.Contains(err.Error(), "result is "+typ+" ") || !strings.Contains(err.Error(), "not bool") {
			t.Errorf("EvalBool(%q) error %q does not name type %s", src, err, typ)
		}
	}
}

func TestCheckExpr(t *testing.T) {
	e := New()
	for src, ok := range map[string]bool{
		`anything.at.all == 1`:      true, // variables are only known at run time
		`defined("x") and x > 1`:    true,
		`cidrHost("10.0.0.0/8", 1)`: true,
		`1 +`:                       false,
		`nosuchfunc(1)`:             false,
		`(`:                         false,
	} {
		err := e.CheckExpr(src)
		if (err == nil) != ok {
			t.Errorf("CheckExpr(%q) = %v, want ok=%v", src, err, ok)
		}
	}
}

// A program compiled once must give each environment its own answer.
func TestEvalProgramReuse(t *testing.T) {
	e := New()
	const src = `inventory_hostname in groups.etcd`
	for host, want := range map[string]bool{"node1": true, "node4": false, "node2": true} {
		vars := testVars()
		vars["inventory_hostname"] = host
		got, err := e.EvalBool(src, vars)
		if err != nil || got != want {
			t.Fatalf("%s: got %v, %v; want %v", host, got, err, want)
		}
	}
	if n := cacheLen(e.exprs); n != 1 {
		t.Fatalf("cache holds %d programs, want 1", n)
	}
	vars := testVars()
	delete(vars, "groups")
	if _, err := e.Eval(src, vars); err == nil || !strings.Contains(err.Error(), `undefined variable "groups"`) {
		t.Fatalf("reused program with groups removed: %v", err)
	}
}

func TestEvalNilVars(t *testing.T) {
	e := New()
	if v, err := e.Eval(`1 + 1`, nil); err != nil || v != 2 {
		t.Fatalf("Eval with nil vars = %v, %v", v, err)
	}
	if _, err := e.Eval(`x`, nil); err == nil {
		t.Fatal("undefined variable with nil vars gave no error")
	}
	if v, err := e.Render(`{{ .x | default 1 }}`, nil); err != nil || v != 1 {
		t.Fatalf("Render with nil vars = %v, %v", v, err)
	}
}
