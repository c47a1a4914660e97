//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/test/testhosts"
)

// partialRuns re-runs parts of create-cluster on the existing cluster as
// docs/playbooks.md tells a user to (issue 46): from the etcd role, from
// the control plane and --tags etcd each change nothing; a --start-at-task
// that names no task is refused before any host is reached, naming the
// nearest tasks.
func partialRuns(ctx context.Context, t *testing.T, kx kubexm, create, bundle string) {
	t.Helper()
	for _, args := range [][]string{
		{"--start-at-task", "etcd : etcd - member address"},
		{"--start-at-task", "control-plane : *"},
		{"--tags", "etcd"},
	} {
		res := kx.play(ctx, create, append([]string{"--offline-bundle", bundle}, args...)...)
		if res.err != nil {
			t.Errorf("create-cluster %s: %v%s", strings.Join(args, " "), res.err, res.failures())
			continue
		}
		t.Logf("PERF create-cluster %s on the existing cluster: %s", strings.Join(args, " "), res.wall.Round(time.Millisecond))
		if c := hostChanges(res); len(c) > 0 {
			t.Errorf("create-cluster %s changed %d things, want 0:\n  %s", strings.Join(args, " "), len(c), strings.Join(c, "\n  "))
		}
	}
	start := time.Now()
	res := kx.play(ctx, create, "--offline-bundle", bundle, "--start-at-task", "etcd : etcd - member adress")
	took := time.Since(start)
	if res.err == nil {
		t.Fatalf("a --start-at-task naming no task ran")
	}
	for _, want := range []string{`"etcd : etcd - member adress" names no task`, `the nearest are ["etcd : etcd - member address"`, "--list-tasks"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("the refusal does not say %s:\n%s", want, tail(res.stderr, 20))
		}
	}
	if len(res.events) > 0 {
		t.Errorf("a --start-at-task naming no task started a run: %d events", len(res.events))
	}
	t.Logf("PERF a --start-at-task naming no task refused in %s", took.Round(time.Millisecond))
}

// readsFromAnywhere runs describe cluster, certs check and backup from a
// directory holding only cluster.yaml (issue 44, "reads work from
// anywhere"): the API answers describe, the check lists every host's
// certificate with its expiry, and the backup holds the cluster's PKI (the
// same CA as the work directory that made the cluster).
func readsFromAnywhere(ctx context.Context, t *testing.T, kx kubexm, set *testhosts.Set, root, name string) {
	t.Helper()
	hosts := len(set.Hosts)
	data, err := os.ReadFile(kx.inventory)
	if err != nil {
		t.Fatal(err)
	}
	// bare is a new directory holding only cluster.yaml.
	bare := func() (string, kubexm) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "cluster.yaml"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		k := kx
		k.dir, k.inventory = dir, filepath.Join(dir, "cluster.yaml")
		return dir, k
	}
	dir, kxD := bare()
	run := func(args ...string) ([]byte, time.Duration) {
		t.Helper()
		cmd := exec.CommandContext(ctx, kx.bin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "KUBEXM_HOME="+filepath.Join(dir, ".kubexm"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		start := time.Now()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kubexm %s from a directory with only cluster.yaml: %v\n%s", strings.Join(args, " "), err, tail(stderr.String(), 40))
		}
		return out, time.Since(start)
	}

	// certs check first, while the directory holds only cluster.yaml: it
	// only reads, so it neither takes the lock nor needs the work
	// directory's PKI; every file on the hosts has its expiry.
	start := time.Now()
	r := certsCheck(ctx, t, kxD)
	took := time.Since(start)
	hostFiles, dated, local := 0, 0, 0
	for _, c := range r.Certificates {
		if c.Host == "localhost" {
			// This directory has no admin kubeconfig: no row, no problem.
			local++
			continue
		}
		hostFiles++
		if c.Status != "missing" && c.Status != "expired" && (c.DaysLeft != nil || c.Kind == "public-key") {
			dated++
		}
	}
	if want := len(expectedCertFiles(set, "")) - 1; hostFiles != want || dated != hostFiles || local != 0 {
		t.Errorf("certs check from a directory with only cluster.yaml: %d files on the hosts (want %d), %d of them with an expiry, %d rows of this machine", hostFiles, want, dated, local)
	}
	t.Logf("PERF certs check from a directory with only cluster.yaml: %s (%d files on the hosts)", took.Round(time.Millisecond), hostFiles)

	// describe cluster takes the admin kubeconfig from the cluster.
	out, took := run("describe", "cluster", "-f", "cluster.yaml", "-o", "json")
	var d struct {
		API   string `json:"api"`
		Hosts []struct {
			Name   string `json:"name"`
			Status string `json:"status"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatalf("describe cluster -o json: %v\n%s", err, out)
	}
	ready := 0
	for _, h := range d.Hosts {
		if h.Status == "Ready" {
			ready++
		}
	}
	if !strings.HasPrefix(d.API, "answered: ") || ready != hosts {
		t.Errorf("describe cluster from a directory with only cluster.yaml: API %q, %d of %d hosts Ready:\n%s", d.API, ready, hosts, out)
	}
	t.Logf("PERF describe cluster from a directory with only cluster.yaml: %s (API %s)", took.Round(time.Millisecond), d.API)

	// backup from another such directory: it takes the cluster's PKI from
	// the masters before it packs it.
	dir, kxE := bare()
	res := kxE.play(ctx, filepath.Join(root, "playbooks", "backup"))
	if res.err != nil {
		t.Fatalf("backup from a directory with only cluster.yaml: %v%s", res.err, res.failures())
	}
	t.Logf("PERF backup from a directory with only cluster.yaml: %s", res.wall.Round(time.Millisecond))
	archives, _ := filepath.Glob(filepath.Join(dir, ".kubexm", name, "backups", name+"-*.tar.gz"))
	if len(archives) != 1 {
		t.Fatalf("backup from a directory with only cluster.yaml made %v, want one archive", archives)
	}
	want, err := os.ReadFile(filepath.Join(kx.dir, ".kubexm", name, "certs", "kubernetes", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	got := archiveFile(t, archives[0], "pki/kubernetes/ca.crt")
	if got == nil || !bytes.Equal(got, want) {
		t.Errorf("the backup from a directory with only cluster.yaml does not hold the cluster's CA (pki/kubernetes/ca.crt: %d bytes)", len(got))
	}
}

// archiveFile returns the file of a .tar.gz whose name ends in suffix, nil
// when there is none.
func archiveFile(t *testing.T, archive, suffix string) []byte {
	t.Helper()
	tr, done := openTarGz(t, archive)
	defer done()
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", archive, err)
		}
		names = append(names, h.Name)
		if strings.HasSuffix(h.Name, suffix) {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Logf("%s holds no %s; it holds: %s", archive, suffix, strings.Join(names, " "))
	return nil
}

// openTarGz opens a .tar.gz archive for reading; done closes it.
func openTarGz(t *testing.T, archive string) (tr *tar.Reader, done func()) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		t.Fatalf("%s: %v", archive, err)
	}
	return tar.NewReader(zr), func() { f.Close() }
}
