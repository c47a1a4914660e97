package client

import (
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/service/api"
	"github.com/mensylisir/kubexm/service/jobstore"
)

func TestWriteJobAndRows(t *testing.T) {
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	var b strings.Builder
	WriteJob(&b, jobstore.Job{ID: "j1", Cluster: "demo", ConfigVersion: 2, Playbook: "upgrade", Status: "failed", Error: "exit 2", Attempts: 1, CreatedAt: at},
		[]jobstore.Event{{Time: at, Kind: "task_start", Host: "n1", Task: "drain"}})
	want := "Job:       j1\nCluster:   demo (config version 2)\nPlaybook:  upgrade\nStatus:    failed\nError:     exit 2\n" +
		"Worker:    -\nAttempts:  1\nCreated:   2026-12-03T10:00:00Z by -\nEvents:\n  10:00:00  task_start     n1 drain\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	if got := BackupRow(api.Backup{Name: "demo.tar.gz", Size: 3 << 20}); got != "demo.tar.gz\t3 MiB\t-\t-" {
		t.Errorf("backup row %q", got)
	}
}

func TestWriteRows(t *testing.T) {
	var b strings.Builder
	bundles := []api.Bundle{{SHA256: "ab12", Size: 2 << 20}, {SHA256: "cd34", Size: 300 << 20}}
	if err := WriteRows(&b, "SHA256\tSIZE\tAGE", bundles, BundleRow); err != nil {
		t.Fatal(err)
	}
	want := "SHA256  SIZE     AGE\nab12    2 MiB    -\ncd34    300 MiB  -\n"
	if b.String() != want {
		t.Errorf("got:\n%q\nwant:\n%q", b.String(), want)
	}
}
