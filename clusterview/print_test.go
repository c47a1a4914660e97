package clusterview

import (
	"strings"
	"testing"
)

func TestWriteTables(t *testing.T) {
	var b strings.Builder
	if err := WriteClusters(&b, nil, "no clusters"); err != nil || b.String() != "no clusters\n" {
		t.Errorf("%v %q", err, b.String())
	}
	b.Reset()
	if err := WriteRuns(&b, ".kubexm/demo", nil); err != nil || b.String() != "no runs in .kubexm/demo\n" {
		t.Errorf("%v %q", err, b.String())
	}
	b.Reset()
	if err := WriteRuns(&b, ".kubexm/demo", []RunEntry{{ID: "r1", Playbook: "create-cluster", Start: "2026-12-03T10:00:00Z", Seconds: 12.34, Outcome: "ok"}, {ID: "r2", Playbook: "upgrade", Outcome: ""}}); err != nil {
		t.Fatal(err)
	}
	if want := "RUN  PLAYBOOK        STARTED               DURATION  OUTCOME\nr1   create-cluster  2026-12-03T10:00:00Z  12.3s     ok\nr2   upgrade                               -         \n"; b.String() != want {
		t.Errorf("got:\n%q\nwant:\n%q", b.String(), want)
	}
	b.Reset()
	if err := WriteNodes(&b, []NodeRow{{Name: "n1", Address: "10.0.0.1", Roles: []string{"master", "etcd"}, InFile: true, Status: "Ready"}, {Name: "x", Status: "Ready"}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "master,etcd") || !strings.Contains(b.String(), "(not in cluster file)") {
		t.Errorf("nodes:\n%s", b.String())
	}
}

func TestDescriptionWrite(t *testing.T) {
	d := &Description{Name: "demo", File: "cluster.yaml", Certificates: []Cert{{File: "pki/ca.crt", Subject: "kubernetes", DaysLeft: 30}}}
	d.State.WorkDir = ".kubexm/demo"
	var b strings.Builder
	if err := d.Write(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Name:", "demo", "admin kubeconfig: none yet", "runs: 0", "renew soon: kubexm certs renew -f cluster.yaml"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in:\n%s", want, b.String())
		}
	}
}
