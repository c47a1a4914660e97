package journal

import (
	"strings"
	"testing"
	"time"
)

func TestWriteLog(t *testing.T) {
	rc := 2
	start := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	var b strings.Builder
	WriteLog(&b, RunInfo{ID: "r1", Playbook: "create-cluster", Start: start}, []LogEntry{
		{Time: start, Host: "n1", Role: "etcd", Task: "start", Status: "failed", DurationMS: 1500, RC: &rc, Pos: "roles/etcd/tasks/main.yaml:3", Message: "exit 2", StderrTail: "a\nb"},
		{Time: start, Host: "n2", Task: "secret", Status: "ok", Hidden: true},
	})
	want := "run r1: playbook create-cluster, started 2026-12-03T10:00:00Z, no end recorded (running, or killed)\n" +
		"10:00:00.000  n1   failed        1.50s rc=2  etcd : start  (roles/etcd/tasks/main.yaml:3)\n" +
		"      msg:\n        exit 2\n      stderr:\n        a\n        b\n" +
		"10:00:00.000  n2   ok            0.00s  secret\n      output hidden (no_log, or it held a secret)\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
