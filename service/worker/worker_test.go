package worker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/service/datadir"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mensylisir/kubexm/service/confine"
	"github.com/mensylisir/kubexm/service/jobstore"
	"github.com/mensylisir/kubexm/service/secretbox"
)

// fakePlay stands in for `kubexm play -o json`: it records its arguments
// and the size of the cluster.yaml it was handed, prints the events of a
// run, and then either ends or waits for a signal (exit 130, as kubexm
// play does when stopped).
const fakePlay = `#!/bin/sh
FAKE_DIR=@DIR@
echo "$@" >> "$FAKE_DIR/args"
env > "$FAKE_DIR/env"
for f in /proc/$$/fd/*; do readlink "$f"; done > "$FAKE_DIR/fds"
wc -c < /dev/fd/3 >> "$FAKE_DIR/config-bytes"
# SSH connections as --conn-events-fd=4 reports them: n2's is still open
# when the run ends.
printf '%s\n' '{"host":"n1","event":"dialed"}' '{"host":"n2","event":"dialed"}' '{"host":"n3","event":"dial_failed"}' '{"host":"n1","event":"closed"}' >&4
echo '{"time":"2026-01-01T00:00:00Z","kind":"run_start","run":"run-1"}'
echo '{"time":"2026-01-01T00:00:00Z","kind":"task_start","run":"run-1","task":"t1"}'
echo '{"time":"2026-01-01T00:00:00Z","kind":"task_end","run":"run-1","task":"t1","duration_ms":5}'
if [ -e "$FAKE_DIR/block" ]; then
  trap 'kill $p; echo "stopped by signal" >&2; exit 130' TERM
  echo '{"time":"2026-01-01T00:00:00Z","kind":"task_start","run":"run-1","task":"t2"}'
  sleep 30 & p=$!
  wait
fi
echo '{"time":"2026-01-01T00:00:00Z","kind":"recap","run":"run-1"}'
`

func setup(t *testing.T) (jobstore.Store, *secretbox.Box, string, string) {
	t.Helper()
	// The workers' job directories, and what they sweep, stay the test's.
	t.Setenv("TMPDIR", t.TempDir())
	dir := t.TempDir()
	exe := filepath.Join(dir, "kubexm")
	// The directory is in the script: the child gets no environment of
	// the worker's.
	if err := os.WriteFile(exe, []byte(strings.ReplaceAll(fakePlay, "@DIR@", dir)), 0o755); err != nil {
		t.Fatal(err)
	}
	store, err := jobstore.Open(context.Background(), filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	box, _ := secretbox.New(bytes.Repeat([]byte{9}, 32))
	sealed, _ := box.Seal([]byte("metadata: {name: c1}\n"), datadir.ConfigAAD("c1"))
	ctx := context.Background()
	if _, err := store.PutCluster(ctx, "c1", sealed, "masked", "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.CreateJob(ctx, jobstore.Job{ID: "j1", Cluster: "c1", Playbook: "p", Options: jobstore.Options{Tags: []string{"a", "b"}, Check: true}}, nil); err != nil {
		t.Fatal(err)
	}
	return store, box, dir, exe
}

// start runs w until ctx ends (each test cancels it before it returns);
// the test's cleanup waits for Run to return, so that no worker writes
// into the test's directory while it is being removed.
func start(t *testing.T, ctx context.Context, w *Worker) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = w.Run(ctx)
	}()
	t.Cleanup(func() { <-done })
}

func newWorker(t *testing.T, store jobstore.Store, box *secretbox.Box, dir, exe, name string) *Worker {
	t.Helper()
	return newWorkerWith(t, store, box, dir, exe, name, func(*Config) {})
}

// newWorkerWith is newWorker with more of the config set by set.
func newWorkerWith(t *testing.T, store jobstore.Store, box *secretbox.Box, dir, exe, name string, set func(*Config)) *Worker {
	t.Helper()
	c := Config{Store: store, Box: box, Name: name, DataDir: filepath.Join(dir, "data"), Exe: exe,
		Playbook: func(n string) (string, error) { return n, nil }, Poll: 20 * time.Millisecond, Heartbeat: 50 * time.Millisecond, TTL: time.Second, Guard: passGuard{}}
	set(&c)
	w, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// passGuard lets every config through: these tests' configs are not
// cluster files.
type passGuard struct{}

func (passGuard) Prepare(_ context.Context, config []byte, _, _ []string, _ int) (confine.Prepared, error) {
	return confine.Prepared{Config: config}, nil
}

func waitFor(t *testing.T, store jobstore.Store, what string, ok func(jobstore.Job) bool) jobstore.Job {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		j, err := store.Job(context.Background(), "j1")
		if err != nil {
			t.Fatal(err)
		}
		if ok(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job not %s: %+v", what, j)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStoppedWorkerHandsItsJobBack: an in-process worker whose context
// ends stops its child and hands the job back as interrupted; another
// worker resumes the engine's run.
func TestStoppedWorkerHandsItsJobBack(t *testing.T) {
	store, box, dir, exe := setup(t)
	if err := os.WriteFile(filepath.Join(dir, "block"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- newWorker(t, store, box, dir, exe, "w1").Run(ctx) }()
	j := waitFor(t, store, "in t2", func(j jobstore.Job) bool { return j.CurrentTask == "t2" })
	if j.RunID != "run-1" || j.Worker != "w1" {
		t.Fatalf("running job: %+v", j)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the worker did not stop")
	}
	j = waitFor(t, store, "interrupted", func(j jobstore.Job) bool { return j.Status == jobstore.Interrupted })
	if !strings.Contains(j.Error, "w1") {
		t.Fatalf("interrupted job: %+v", j)
	}

	os.Remove(filepath.Join(dir, "block"))
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	start(t, ctx2, newWorker(t, store, box, dir, exe, "w2"))
	j = waitFor(t, store, "succeeded", func(j jobstore.Job) bool { return j.Status == jobstore.Succeeded })
	if j.Worker != "w2" || j.Attempts != 2 {
		t.Fatalf("resumed job: %+v", j)
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	lines := strings.Split(strings.TrimSpace(string(args)), "\n")
	if len(lines) != 2 || strings.Contains(lines[0], "--resume") || !strings.HasSuffix(lines[1], "--resume=run-1") ||
		!strings.Contains(lines[0], "play p -i /dev/fd/3 --workdir "+filepath.Join(dir, "data", "clusters", "c1")+" -o json --tags a,b --check") {
		t.Fatalf("child arguments:\n%s", args)
	}
	if n, _ := os.ReadFile(filepath.Join(dir, "config-bytes")); strings.Fields(string(n))[0] != "21" {
		t.Fatalf("the child read %q bytes of cluster.yaml, want 21", n)
	}
	evs, _ := store.Events(context.Background(), "j1", 0, 0)
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
	}
	got := strings.Join(kinds, " ")
	want := "job_start run_start task_start task_end task_start job_interrupted job_start run_start task_start task_end recap job_end"
	if got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
}

// TestCancelAndFailure: a cancel reaches the running child as SIGTERM; a
// child that fails leaves its last stderr line as the job's error.
func TestCancelAndFailure(t *testing.T) {
	store, box, dir, exe := setup(t)
	if err := os.WriteFile(filepath.Join(dir, "block"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start(t, ctx, newWorker(t, store, box, dir, exe, "w1"))
	waitFor(t, store, "in t2", func(j jobstore.Job) bool { return j.CurrentTask == "t2" })
	if _, err := store.Cancel(context.Background(), "j1"); err != nil {
		t.Fatal(err)
	}
	j := waitFor(t, store, "cancelled", func(j jobstore.Job) bool { return !j.Status.Active() })
	if j.Status != jobstore.Cancelled {
		t.Fatalf("cancelled job: %+v", j)
	}
	// Resumed, it is stopped again, this time failing on its own.
	if err := os.WriteFile(exe, []byte("#!/bin/sh\necho 'Error: task t1 failed on node1' >&2\nexit 2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Resume(context.Background(), "j1", nil); err != nil {
		t.Fatal(err)
	}
	j = waitFor(t, store, "failed", func(j jobstore.Job) bool { return j.Status == jobstore.Failed })
	if !strings.HasPrefix(j.Error, "task t1 failed on node1 (exit status 2)") {
		t.Fatalf("failed job's error: %q", j.Error)
	}
}

// TestSSHMetrics: the SSH connection events of a job's child become
// kubexm_ssh_dials_total and kubexm_ssh_connections_open; a connection the
// child still held when it ended is no longer counted open.
func TestSSHMetrics(t *testing.T) {
	store, box, dir, exe := setup(t)
	reg := prometheus.NewRegistry()
	w := newWorkerWith(t, store, box, dir, exe, "w1", func(c *Config) { c.Metrics = NewMetrics(reg) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start(t, ctx, w)
	waitFor(t, store, "succeeded", func(j jobstore.Job) bool { return j.Status == jobstore.Succeeded })
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			got[key] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{
		"kubexm_ssh_dials_total cluster=c1 host=n1 result=ok":     1,
		"kubexm_ssh_dials_total cluster=c1 host=n2 result=ok":     1,
		"kubexm_ssh_dials_total cluster=c1 host=n3 result=failed": 1,
		"kubexm_ssh_connections_open cluster=c1 host=n1":          0,
		"kubexm_ssh_connections_open cluster=c1 host=n2":          0,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	for k := range got {
		if strings.HasPrefix(k, "kubexm_ssh_") {
			if _, ok := want[k]; !ok {
				t.Errorf("unexpected series %s", k)
			}
		}
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	if !strings.HasPrefix(string(args), "--conn-events-fd=4 play ") {
		t.Fatalf("child args: %s", args)
	}
}

// TestServiceChildEnvironment: a job's child gets no variable of the
// worker's environment but PATH and the proxies, a home and temp dir of its
// own (removed with the job), and no descriptor the worker inherited.
func TestServiceChildEnvironment(t *testing.T) {
	store, box, dir, exe := setup(t)
	t.Setenv("KUBEXM_SECRET_KEY", "worker-only-key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "worker-only-cloud")
	t.Setenv("https_proxy", "http://proxy.example:3128")
	leak := filepath.Join(dir, "inherited")
	if err := os.WriteFile(leak, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// As a descriptor a service manager or a shell leaves open: no
	// close-on-exec.
	fd, err := syscall.Open(leak, syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start(t, ctx, newWorker(t, store, box, dir, exe, "w1"))
	waitFor(t, store, "succeeded", func(j jobstore.Job) bool { return j.Status == jobstore.Succeeded })
	data, _ := os.ReadFile(filepath.Join(dir, "env"))
	env := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		env[k] = v
	}
	for _, k := range []string{"KUBEXM_SECRET_KEY", "AWS_SECRET_ACCESS_KEY"} {
		if _, ok := env[k]; ok {
			t.Errorf("the child got %s", k)
		}
	}
	if env["https_proxy"] != "http://proxy.example:3128" || env["PATH"] != os.Getenv("PATH") || env["KUBEXM_HOME"] == "" {
		t.Errorf("the child's environment lacks what it needs: %v", env)
	}
	home, tmp := env["HOME"], env["TMPDIR"]
	if home == "" || tmp == "" || home == os.Getenv("HOME") || filepath.Dir(home) != filepath.Dir(tmp) {
		t.Errorf("HOME %q and TMPDIR %q: want a job dir of their own", home, tmp)
	}
	if _, err := os.Stat(filepath.Dir(home)); !os.IsNotExist(err) {
		t.Errorf("the job's dir %s stays after the job: %v", filepath.Dir(home), err)
	}
	fds, _ := os.ReadFile(filepath.Join(dir, "fds"))
	if strings.Contains(string(fds), leak) {
		t.Errorf("the child inherited the worker's descriptor of %s:\n%s", leak, fds)
	}
	if !strings.Contains(string(fds), "memfd:cluster.yaml") {
		t.Errorf("the child lacks its config descriptor:\n%s", fds)
	}
}

// TestServiceWorkDirWritableByOthers: a cluster's work directory another
// user may write to (plant a lock, a journal) fails the job before its
// child starts.
func TestServiceWorkDirWritableByOthers(t *testing.T) {
	store, box, dir, exe := setup(t)
	wd := datadir.WorkDir(filepath.Join(dir, "data"), "c1")
	if err := os.MkdirAll(wd, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(wd, 0o777); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start(t, ctx, newWorker(t, store, box, dir, exe, "w1"))
	j := waitFor(t, store, "failed", func(j jobstore.Job) bool { return !j.Status.Active() })
	if j.Status != jobstore.Failed || !strings.Contains(j.Error, "writable by its group or by others") {
		t.Fatalf("job in a 0777 work dir: %+v", j)
	}
	if _, err := os.Stat(filepath.Join(dir, "args")); err == nil {
		t.Fatal("the child ran")
	}
}

// TestServiceChildLimits: a job's child runs under the worker's memory
// and CPU-time limits (issue 45: a template bomb took a child to 1.5 GB),
// and its Go runtime is told to collect well before.
func TestServiceChildLimits(t *testing.T) {
	store, box, dir, exe := setup(t)
	script := "#!/bin/sh\nsleep 0.3\n{ ulimit -v; ulimit -t; echo \"$GOMEMLIMIT\"; } > " + filepath.Join(dir, "limits") + "\necho '{\"kind\":\"recap\"}'\n"
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	w := newWorkerWith(t, store, box, dir, exe, "w1", func(c *Config) { c.MemoryLimit, c.CPULimit = 3<<30, 90*time.Minute })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start(t, ctx, w)
	waitFor(t, store, "succeeded", func(j jobstore.Job) bool { return j.Status == jobstore.Succeeded })
	got, _ := os.ReadFile(filepath.Join(dir, "limits"))
	if want := fmt.Sprintf("%d\n%d\n%d\n", 3<<20, 90*60, (3<<30)/4); string(got) != want {
		t.Fatalf("the child's limits (ulimit -v, -t, GOMEMLIMIT):\n%s\nwant\n%s", got, want)
	}
}
