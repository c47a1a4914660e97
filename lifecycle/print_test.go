package lifecycle

import (
	"errors"
	"strings"
	"testing"
)

func TestPlanSummaryWrite(t *testing.T) {
	s := PlanSummary{ToChange: 1, Unchanged: 3, Skipped: 1, Hosts: []*HostPlan{
		{Host: "n1", Changes: []PlanChange{{Task: "etcd : config", Diff: "-a\n+b\n"}}, Unchanged: 2},
		{Host: "n2", Unchanged: 1},
	}}
	var b strings.Builder
	if err := s.Write(&b, "text", nil); err != nil {
		t.Fatal(err)
	}
	want := "n1: 1 to change, 2 unchanged\n  ~ etcd : config\n      -a\n      +b\nn2: no changes (1 unchanged)\n\n" +
		"1 tasks skipped: they do not apply, or their check needs an earlier change made first.\nPlan: 1 to change, 3 unchanged.\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	stop := errors.New("unreachable")
	if err := s.Write(&b, "text", stop); err != stop || !strings.Contains(b.String(), "The plan is incomplete: the check run stopped (unreachable).") || strings.Contains(b.String(), "Plan:") {
		t.Errorf("a stopped run: %v\n%s", err, b.String())
	}
	// For programs: one JSON line, the run's failure still returned.
	b.Reset()
	if err := s.Write(&b, "json", stop); err != stop || !strings.HasPrefix(b.String(), `{"kind":"","to_change":1,"unchanged":3,`) || strings.Count(b.String(), "\n") != 1 {
		t.Errorf("json: %v\n%s", err, b.String())
	}
}

func TestHostRunWrite(t *testing.T) {
	var b strings.Builder
	HostRun{Host: "n1", Status: "failed", RC: 3, Stdout: "out\n", Stderr: "err\n"}.Write(&b, "text")
	HostRun{Host: "n2", Status: "unreachable", Error: "dial: refused"}.Write(&b, "text")
	HostRun{Host: "n3", Status: "ok", Truncated: true}.Write(&b, "text")
	want := "n1 | FAILED | rc=3 >>\nout\nstderr:\nerr\nn2 | UNREACHABLE | dial: refused\nn3 | ok | rc=0 >>\n(output truncated)\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	HostRun{Kind: "host_result", Host: "n1", Status: "ok"}.Write(&b, "json")
	if !strings.HasPrefix(b.String(), `{"kind":"host_result","host":"n1","status":"ok"`) {
		t.Errorf("json: %s", b.String())
	}
}

func TestWriteCommandSummary(t *testing.T) {
	var b strings.Builder
	err := WriteCommandSummary(&b, "text", []HostRun{{Host: "b", Status: "failed"}, {Host: "a", Status: "ok"}, {Host: "c", Status: "unreachable"}})
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != 2 || b.String() != "\n3 hosts: 1 ok, 1 failed, 1 unreachable\n" {
		t.Errorf("%v\n%q", err, b.String())
	}
	b.Reset()
	if err := WriteCommandSummary(&b, "json", []HostRun{{Host: "a", Status: "ok"}}); err != nil || b.String() != `{"failed":[],"kind":"summary","ok":1,"unreachable":[]}`+"\n" {
		t.Errorf("%v\n%q", err, b.String())
	}
}

func TestCertsReportWrite(t *testing.T) {
	days := 12
	r := &CertsReport{Cluster: "demo", WarnWithinDays: 30, Problems: 2, Certificates: []CertEntry{
		{Host: "m1", Path: "/etc/kubernetes/pki/ca.crt", Status: "ok", Exists: true, CommonName: "kubernetes", Issuer: "kubernetes", NotAfter: "2036-01-01", DaysLeft: &days, IsCA: true, SANs: CertSANs{DNS: []string{"a"}, IPs: []string{"10.0.0.1"}}},
		{Host: "m1", Path: "/etc/kubernetes/pki/sa.pub", Status: "ok", Exists: true, Kind: "public-key", KeyType: "RSA", Fingerprint: "0123456789abcdef0123"},
		{Host: "m1", Path: "/etc/kubernetes/admin.conf", Status: "missing"},
	}}
	var b strings.Builder
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kubernetes (CA)", "12d", "a,10.0.0.1", "RSA key sha256:0123456789abcdef", "never", "MISSING",
		"3 files on the hosts of cluster demo; 2 expire within 30 days, have expired or are missing"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in:\n%s", want, b.String())
		}
	}
}

func TestConfirm(t *testing.T) {
	var errw strings.Builder
	if err := Confirm(strings.NewReader("yes\n"), &errw, "Delete?"); err != nil || errw.String() != "Delete?\nType yes to continue: " {
		t.Errorf("%v %q", err, errw.String())
	}
	if err := Confirm(strings.NewReader("y\n"), &errw, "Delete?"); err == nil || !strings.Contains(err.Error(), `answered "y", not yes`) {
		t.Errorf("y: %v", err)
	}
	if err := Confirm(strings.NewReader(""), &errw, "Delete?"); err == nil || !strings.Contains(err.Error(), "pass --yes") {
		t.Errorf("no answer: %v", err)
	}
}
