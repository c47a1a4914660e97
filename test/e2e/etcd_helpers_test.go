//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/test/testhosts"
)

// buildKubexm compiles cmd/kubexm into dir, statically linked.
func buildKubexm(ctx context.Context, t *testing.T, root, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "kubexm")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/kubexm")
	// Static, as make build and make release build it: the in-cluster
	// controller's image (builtin controller_image) holds this binary and
	// no C library.
	cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kubexm: %v\n%s", err, out)
	}
	return bin
}

// etcdRelease lays out etcd's release (tarball and SHA256SUMS, built from the
// Go module proxy on first use) with test/artifacts/release.sh and returns
// the directory a file server serves as https://github.com.
func etcdRelease(ctx context.Context, t *testing.T, root, version string) string {
	t.Helper()
	tarball := buildArtifact(ctx, t, root, []string{"ETCD_VERSION=" + version, "GOARCH=amd64"}, "release.sh")
	// .../<root>/etcd-io/etcd/releases/download/<version>/<tarball>
	serveRoot := tarball
	for range 6 {
		serveRoot = filepath.Dir(serveRoot)
	}
	if _, err := os.Stat(filepath.Join(serveRoot, "etcd-io", "etcd", "releases", "download", version, "SHA256SUMS")); err != nil {
		t.Fatalf("release.sh printed %s, but SHA256SUMS is not beside it: %v", tarball, err)
	}
	return serveRoot
}

// serveDir serves dir over HTTP on the test bridge's gateway address, where
// both the control machine (this one) and the test machines reach it.
func serveDir(t *testing.T, addr, dir string) string {
	t.Helper()
	return serveDirUntil(context.Background(), t, addr, dir)
}

// serveDirUntil is serveDir that also stops serving when ctx ends.
func serveDirUntil(ctx context.Context, t *testing.T, addr, dir string) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatalf("listen on the gateway %s: %v", addr, err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(dir)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	t.Cleanup(func() {
		stop()
		_ = srv.Close()
	})
	return "http://" + ln.Addr().String()
}

// clusterYAML is the test cluster: every machine an etcd member, n1 the
// master, the others workers. kube-proxy's ipvs mode is off because the test
// kernel has no IP_VS; extra hosts, resolves and a timezone exercise the os
// role's reversible changes.
func clusterYAML(name string, set *testhosts.Set) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: kubexm.mensylisir.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: %s\nspec:\n  hosts:\n", name)
	for _, h := range set.Hosts {
		fmt.Fprintf(&b, "  - {name: %s, address: %s, internalAddress: %s, port: %d, user: root, privateKeyPath: %q}\n",
			h.Name, h.Address, h.Address, h.Port, set.KeyPath)
	}
	b.WriteString("  roleGroups:\n    etcd:\n")
	for _, h := range set.Hosts {
		fmt.Fprintf(&b, "    - %s\n", h.Name)
	}
	fmt.Fprintf(&b, "    master:\n    - %s\n    worker:\n", set.Hosts[0].Name)
	for _, h := range set.Hosts[1:] {
		fmt.Fprintf(&b, "    - %s\n", h.Name)
	}
	fmt.Fprintf(&b, `  system:
    timezone: Asia/Shanghai
  kubernetes:
    proxyMode: iptables
  etcd:
    type: kubexm
    dataDir: /var/lib/etcd
  extra:
    hosts:
    - {domain: artifacts.e2e.kubexm.local, address: %s}
    resolves:
    - {address: %s}
`, set.Gateway, set.Gateway)
	return b.String()
}

// event is the part of a --output json line the test reads.
type event struct {
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"`
	Play    string    `json:"play"`
	Role    string    `json:"role"`
	Task    string    `json:"task"`
	Host    string    `json:"host"`
	Status  string    `json:"status"`
	Message string    `json:"message"`
	Resumed bool      `json:"resumed"`
	// Diff of a changed result under --diff: what the task changed.
	Diff string `json:"diff"`
	// DurationMS of a task_end: the task's wall time over all its hosts.
	DurationMS int64 `json:"duration_ms"`
	Recap      *struct {
		Hosts map[string]struct {
			OK          int    `json:"ok"`
			Changed     int    `json:"changed"`
			Failed      int    `json:"failed"`
			Unreachable int    `json:"unreachable"`
			Error       string `json:"error"`
		} `json:"hosts"`
		Failed bool `json:"failed"`
	} `json:"recap"`
}

// runResult is one kubexm run.
type runResult struct {
	events []event
	wall   time.Duration
	// cpu is kubexm's own user and system time: unlike the wall time it
	// hardly depends on what else the machine is doing.
	cpu    time.Duration
	err    error
	stderr string
}

func (r runResult) recap() *event {
	for i := len(r.events) - 1; i >= 0; i-- {
		if r.events[i].Kind == "recap" && r.events[i].Recap != nil {
			return &r.events[i]
		}
	}
	return nil
}

// changed lists "host: task" for every changed outcome.
// during lists the tasks of the run that overlap from..to (a task_start
// before to whose task_end is after from), with the hosts that reported
// in the window, for a report that says what ran during an outage.
func (r runResult) during(from, to time.Time) []string {
	var out []string
	started := map[string]time.Time{}
	hosts := map[string][]string{}
	for _, e := range r.events {
		key := e.Play + "\x00" + e.Task
		switch e.Kind {
		case "task_start":
			started[key] = e.Time
			hosts[key] = nil
		case "host_result":
			if !e.Time.Before(from) && !e.Time.After(to) {
				hosts[key] = append(hosts[key], e.Host+" "+e.Status)
			}
		case "task_end":
			if s, ok := started[key]; ok && s.Before(to) && e.Time.After(from) {
				out = append(out, fmt.Sprintf("%s-%s [%s] %s %v", s.UTC().Format("15:04:05.000"), e.Time.UTC().Format("15:04:05.000"), e.Role, e.Task, hosts[key]))
			}
			delete(started, key)
		}
	}
	for key, s := range started {
		if s.Before(to) {
			out = append(out, fmt.Sprintf("%s- (not ended) %s", s.UTC().Format("15:04:05.000"), strings.ReplaceAll(key, "\x00", ": ")))
		}
	}
	return out
}

// firstChange is when the first task that changed something on a host
// started, or the zero time when nothing changed.
func (r runResult) firstChange() time.Time {
	started := map[string]time.Time{}
	for _, e := range r.events {
		key := e.Play + "\x00" + e.Task
		switch {
		case e.Kind == "task_start":
			started[key] = e.Time
		case e.Kind == "host_result" && e.Status == "changed":
			if s, ok := started[key]; ok {
				return s
			}
			return e.Time
		}
	}
	return time.Time{}
}

func (r runResult) changed() []string {
	var out []string
	for _, e := range r.events {
		if e.Kind == "host_result" && e.Status == "changed" {
			out = append(out, fmt.Sprintf("%s: %s", e.Host, e.Task))
		}
	}
	return out
}

// changedDiffs is what each changed task changed (its diff under --diff,
// else its message: a file's mode or owner), for a run that should have
// changed nothing.
func (r runResult) changedDiffs() string {
	var b strings.Builder
	for _, e := range r.events {
		if e.Kind == "host_result" && e.Status == "changed" {
			fmt.Fprintf(&b, "\n%s: %s: %s\n%s", e.Host, e.Task, e.Message, e.Diff)
		}
	}
	return b.String()
}

// slowest names the n tasks that took longest, with their wall times and
// their share of the run, so a PERF line says where a slow run's time went.
func (r runResult) slowest(n int) string {
	type took struct {
		name string
		ms   int64
	}
	var tasks []took
	var sum int64
	ended := 0
	for _, e := range r.events {
		if e.Kind == "task_end" {
			sum += e.DurationMS
			ended++
		}
		if e.Kind == "task_end" && e.DurationMS > 0 {
			name := e.Task
			if e.Role != "" {
				name = e.Role + " : " + name
			}
			tasks = append(tasks, took{name, e.DurationMS})
		}
	}
	sort.SliceStable(tasks, func(i, j int) bool { return tasks[i].ms > tasks[j].ms })
	var b strings.Builder
	// What the tasks do not add up to is the engine's own time between
	// tasks (loading, templating, planning) and the run's start and end.
	fmt.Fprintf(&b, " kubexm used %.1fs of CPU; %d tasks took %.1fs together, %.1fs outside tasks;", r.cpu.Seconds(), ended, float64(sum)/1000, (r.wall - time.Duration(sum)*time.Millisecond).Seconds())
	for i, tk := range tasks {
		if i == n {
			break
		}
		share := 0.0
		if r.wall > 0 {
			share = 100 * float64(tk.ms) / float64(r.wall.Milliseconds())
		}
		fmt.Fprintf(&b, "\n    %6.1fs %4.1f%%  %s", float64(tk.ms)/1000, share, tk.name)
	}
	return b.String()
}

// failures describes what failed, for test messages.
func (r runResult) failures() string {
	var b strings.Builder
	for _, e := range r.events {
		if e.Kind == "host_result" && (e.Status == "failed" || e.Status == "unreachable") {
			fmt.Fprintf(&b, "\n  %s [%s] %s: %s", e.Host, e.Role, e.Task, e.Message)
		}
	}
	if b.Len() == 0 {
		b.WriteString("\n  stderr: " + strings.TrimSpace(r.stderr))
	}
	return b.String()
}

// kubexm runs the binary in its own directory, where .kubexm/<cluster> goes.
type kubexm struct {
	bin, dir, inventory string
	extra               []string // -e arguments for every run
	// workDir, when set, is every run's --workdir (else .kubexm/<cluster>
	// under dir): the work directory of the cluster's kubexm server.
	workDir string
	// observe, when set, sees every run's result (diagnostics.observe).
	observe func(runResult)
}

func (k kubexm) command(ctx context.Context, playbook string, args ...string) *exec.Cmd {
	argv := append([]string{"play", playbook, "-i", k.inventory, "--output", "json"}, args...)
	for _, e := range k.extra {
		argv = append(argv, "-e", e)
	}
	if k.workDir != "" {
		argv = append(argv, "--workdir", k.workDir)
	}
	cmd := exec.CommandContext(ctx, k.bin, argv...)
	cmd.Dir = k.dir
	// The test machines get new host keys each time they are made: trust
	// is kept with this run's directory, not in the user's ~/.kubexm.
	cmd.Env = append(os.Environ(), "KUBEXM_HOME="+filepath.Join(k.dir, ".kubexm"))
	if dir := os.Getenv("KUBEXM_E2E_CPUPROFILE_DIR"); dir != "" {
		// One CPU profile per run, named by time and playbook, for
		// `go tool pprof`: see docs/perf.md.
		name := fmt.Sprintf("%s-%s.pprof", time.Now().Format("150405.000"), filepath.Base(playbook))
		cmd.Env = append(cmd.Env, "KUBEXM_CPUPROFILE="+filepath.Join(dir, name))
	}
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// play runs a playbook to its end.
func (k kubexm) play(ctx context.Context, playbook string, args ...string) runResult {
	return k.playUntil(ctx, nil, playbook, args...)
}

// playUntil runs a playbook and kills it (SIGKILL, as a crash or a lost
// terminal would) as soon as stop returns true for an event.
func (k kubexm) playUntil(ctx context.Context, stop func(event) bool, playbook string, args ...string) runResult {
	cmd := k.command(ctx, playbook, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return runResult{err: err}
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return runResult{err: err}
	}
	var res runResult
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	killed := false
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		res.events = append(res.events, e)
		if stop != nil && !killed && stop(e) {
			killed = true
			_ = cmd.Process.Kill()
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	res.err = cmd.Wait()
	res.wall = time.Since(start)
	if ps := cmd.ProcessState; ps != nil {
		res.cpu = ps.UserTime() + ps.SystemTime()
	}
	res.stderr = stderr.String()
	if killed {
		var ee *exec.ExitError
		if errors.As(res.err, &ee) {
			res.err = nil
		}
	}
	if k.observe != nil {
		k.observe(res)
	}
	return res
}

// snapshot describes the files under paths on one machine: type, mode,
// owner, symlink target and content hash of each, sorted, one per line.
func snapshot(ctx context.Context, t *testing.T, set *testhosts.Set, host string, paths ...string) map[string]string {
	t.Helper()
	script := fmt.Sprintf(`for p in %s; do
  [ -e "$p" ] || { echo "$p absent"; continue; }
  find "$p" -xdev -path /var/lib/systemd -prune -o -printf '%%p %%y %%m %%u:%%g %%l\n'
  find "$p" -xdev -path /var/lib/systemd -prune -o -type f -exec sha256sum {} +
done | LC_ALL=C sort`, strings.Join(paths, " "))
	out, err := set.SSH(ctx, host, script)
	if err != nil {
		t.Fatalf("snapshot of %s: %v", host, err)
	}
	snap := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		// "path type mode owner target" and "sum  path": key by path.
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && len(f[0]) == 64:
			snap[f[1]] += " sha256=" + f[0]
		case len(f) >= 1:
			snap[f[0]] += " " + strings.Join(f[1:], " ")
		}
	}
	return snap
}

// diffSnapshots lists the paths whose description differs.
func diffSnapshots(before, after map[string]string) []string {
	var out []string
	for p, b := range before {
		if a, ok := after[p]; !ok {
			out = append(out, "removed "+p)
		} else if a != b {
			out = append(out, fmt.Sprintf("changed %s:%s ->%s", p, b, a))
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			out = append(out, "added "+p+after[p])
		}
	}
	sort.Strings(out)
	return out
}

// unitState lists the unit files systemd knows and their enablement.
func unitState(ctx context.Context, t *testing.T, set *testhosts.Set, host string) string {
	t.Helper()
	out, err := set.SSH(ctx, host, "systemctl list-unit-files --no-legend --no-pager | LC_ALL=C sort")
	if err != nil {
		t.Fatalf("unit files of %s: %v", host, err)
	}
	return out
}

// etcdctl runs etcdctl on host with the member's admin client certificate.
func etcdctl(ctx context.Context, set *testhosts.Set, host, endpoints string, args string) (string, error) {
	ssl := "/etc/kubexm/etcd/ssl"
	return set.SSH(ctx, host, fmt.Sprintf("ETCDCTL_API=3 /usr/local/bin/etcdctl --endpoints=%s --cacert=%s/ca.pem --cert=%s/admin-%s.pem --key=%s/admin-%s-key.pem %s",
		endpoints, ssl, ssl, host, ssl, host, args))
}

// checkEtcd proves a healthy 3-member cluster with TLS: every member healthy
// over its client URL, a write through one member read back through another,
// and no access without a client certificate.
func checkEtcd(ctx context.Context, t *testing.T, set *testhosts.Set) {
	t.Helper()
	var eps []string
	for _, h := range set.Hosts {
		eps = append(eps, "https://"+net.JoinHostPort(h.Address, "2379"))
	}
	first, last := set.Hosts[0], set.Hosts[len(set.Hosts)-1]
	out, err := etcdctl(ctx, set, first.Name, eps[0], "endpoint health --cluster -w json")
	if err != nil {
		t.Fatalf("etcdctl endpoint health: %v\n%s", err, out)
	}
	var health []struct {
		Endpoint string `json:"endpoint"`
		Health   bool   `json:"health"`
	}
	if err := json.Unmarshal([]byte(out), &health); err != nil {
		t.Fatalf("endpoint health output %q: %v", out, err)
	}
	healthy := 0
	for _, h := range health {
		if h.Health {
			healthy++
		}
	}
	if healthy != len(set.Hosts) {
		t.Fatalf("%d healthy members, want %d: %s", healthy, len(set.Hosts), out)
	}
	key := fmt.Sprintf("/kubexm-e2e/%d", time.Now().UnixNano())
	if out, err := etcdctl(ctx, set, first.Name, eps[0], "put "+key+" hello"); err != nil {
		t.Fatalf("put through %s: %v\n%s", first.Name, err, out)
	}
	got, err := etcdctl(ctx, set, last.Name, eps[len(eps)-1], "get --print-value-only "+key)
	if err != nil || strings.TrimSpace(got) != "hello" {
		t.Fatalf("get through %s: %q, %v", last.Name, got, err)
	}
	if out, err := set.SSH(ctx, first.Name, fmt.Sprintf("ETCDCTL_API=3 /usr/local/bin/etcdctl --endpoints=%s --cacert=/etc/kubexm/etcd/ssl/ca.pem --dial-timeout=3s --command-timeout=5s get %s", eps[0], key)); err == nil {
		t.Errorf("a client without a certificate could read etcd: %s", out)
	}
	t.Logf("etcd: %d healthy members with TLS; a write on %s was read on %s", healthy, first.Name, last.Name)
}
