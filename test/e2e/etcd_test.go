//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/test/testhosts"
)

// etcdVersion is the etcd the suites' clusters run: kubexm's default
// (schema.DefaultEtcdVersion).
const etcdVersion = "v3.7.3"

// etcdPreviousVersion is the minor TestEtcdCluster creates its cluster at,
// to upgrade it to etcdVersion.
const etcdPreviousVersion = "v3.6.16"

// TestEtcdCluster is issue 8's acceptance on three fresh test machines:
//
//   - preflight reports every problem of every host together, and stops the
//     run before anything changes;
//   - --check on fresh machines changes nothing on them;
//   - create-cluster --tags preflight,os,etcd brings up a healthy 3-member
//     etcd cluster with TLS (checked with etcdctl over ssh);
//   - running it again reports 0 changed;
//   - playbooks/delete leaves /etc/hosts, /etc/sysctl.d, /etc/modules-load.d
//     and the systemd units as they were before the install (in fact all of
//     /etc, /usr/local/bin and /var/lib, and the unit files systemd lists);
//   - a create killed during the etcd role completes with --resume;
//   - playbooks/upgrade-etcd moves the v3.6 cluster to v3.7 (etcdUpgrade).
//
// It prints the wall time of the create, of the re-run and of the upgrade
// (PERF lines).
func TestEtcdCluster(t *testing.T) {
	parallelSuite(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	root := moduleRoot(t)
	work := t.TempDir()

	releaseRoot := etcdRelease(ctx, t, root, etcdPreviousVersion)
	if r := etcdRelease(ctx, t, root, etcdVersion); r != releaseRoot {
		t.Fatalf("the releases of %s and %s are laid out under %s and %s, want one root", etcdPreviousVersion, etcdVersion, releaseRoot, r)
	}
	bin := buildKubexm(ctx, t, root, work)

	set, diag := suiteMachines(ctx, t, 3, "e")
	server := serveDir(t, set.Gateway, releaseRoot)

	inventory := filepath.Join(work, "cluster.yaml")
	if err := os.WriteFile(inventory, []byte(clusterYAML("e2e-etcd", set)), 0o600); err != nil {
		t.Fatal(err)
	}
	// Created at the previous minor, to be upgraded to the default.
	setEtcdVersion(t, inventory, etcdPreviousVersion)
	kx := kubexm{
		bin: bin, dir: work, inventory: inventory, observe: diag.observe,
		extra: extraVars(
			// The artifact source: the local stand-in for github.com.
			`{"etcd_mirrors": ["`+server+`/etcd-io/etcd/releases/download/`+etcdPreviousVersion+`"]}`,
			// The machines have no package mirror; these are installed already.
			`{"os_packages": ["iptables", "iproute2", "kmod", "procps"]}`,
			// systemd-nspawn machines: vm.*, kernel.*, fs.* are read-only.
			"os_sysctl_ignore_readonly=true",
		),
	}
	create := filepath.Join(root, "playbooks", "create-cluster")
	del := filepath.Join(root, "playbooks", "delete")
	tags := "--tags=preflight,os,etcd"

	// Preflight reports every problem of every host in one run and stops
	// before anything changes: too few CPUs everywhere, leftovers on two.
	for _, h := range set.Hosts[:2] {
		if _, err := set.SSH(ctx, h.Name, "mkdir /etc/kubernetes"); err != nil {
			t.Fatal(err)
		}
	}
	res := kx.play(ctx, create, tags, "-e", "preflight_min_cpus=512")
	if res.err == nil {
		t.Fatal("preflight passed with preflight_min_cpus=512 and /etc/kubernetes on two machines")
	}
	report := res.failures()
	for i, h := range set.Hosts {
		if !strings.Contains(report, fmt.Sprintf("%s [preflight] Every preflight check passed", h.Name)) ||
			!strings.Contains(report, fmt.Sprintf("Node %s (%s) lacks resources: CPU cores", h.Name, h.Address)) {
			t.Errorf("the preflight report lacks %s's hardware problem:%s", h.Name, report)
		}
		if leftovers := strings.Contains(report, fmt.Sprintf("leftovers detected on node %s (%s) (/etc/kubernetes)", h.Name, h.Address)); leftovers != (i < 2) {
			t.Errorf("%s: /etc/kubernetes reported %v, want %v:%s", h.Name, leftovers, i < 2, report)
		}
	}
	if c := res.changed(); len(c) > 0 {
		t.Errorf("a run failing preflight changed things:\n  %s", strings.Join(c, "\n  "))
	}
	for _, h := range set.Hosts[:2] {
		if _, err := set.SSH(ctx, h.Name, "rmdir /etc/kubernetes"); err != nil {
			t.Fatal(err)
		}
	}

	// What a fresh machine looks like, for --check and for delete
	// (/var/lib/systemd is left out: systemd's own bookkeeping).
	wide := []string{"/etc", "/usr/local/bin", "/var/lib"}
	fresh := map[string]map[string]string{}
	freshUnits := map[string]string{}
	for _, h := range set.Hosts {
		fresh[h.Name] = snapshot(ctx, t, set, h.Name, wide...)
		freshUnits[h.Name] = unitState(ctx, t, set, h.Name)
	}

	// --check on fresh machines: succeeds and changes nothing.
	res = kx.play(ctx, create, tags, "--check")
	if res.err != nil {
		t.Fatalf("create-cluster --check failed: %v%s", res.err, res.failures())
	}
	for _, h := range set.Hosts {
		if d := diffSnapshots(fresh[h.Name], snapshot(ctx, t, set, h.Name, wide...)); len(d) > 0 {
			t.Errorf("--check changed %s:\n  %s", h.Name, strings.Join(d, "\n  "))
		}
	}
	t.Logf("--check on fresh machines: %d tasks would change something, nothing changed (%s)", len(res.changed()), res.wall.Round(time.Millisecond))

	// create.
	res = kx.play(ctx, create, tags)
	if res.err != nil {
		t.Fatalf("create-cluster failed after %s: %v%s", res.wall, res.err, res.failures())
	}
	createWall := res.wall
	t.Logf("PERF create-cluster --tags preflight,os,etcd on 3 fresh machines: %s (%d changed)", createWall.Round(time.Millisecond), len(res.changed()))
	checkEtcd(ctx, t, set)

	// The same again: nothing to do.
	res = kx.play(ctx, create, tags)
	if res.err != nil {
		t.Fatalf("re-run failed: %v%s", res.err, res.failures())
	}
	t.Logf("PERF create-cluster re-run (nothing to change): %s", res.wall.Round(time.Millisecond))
	if c := res.changed(); len(c) > 0 {
		t.Errorf("re-run changed %d things, want 0:\n  %s", len(c), strings.Join(c, "\n  "))
	}
	if rc := res.recap(); rc == nil {
		t.Error("re-run printed no recap event")
	} else {
		for h, s := range rc.Recap.Hosts {
			if s.Changed != 0 {
				t.Errorf("re-run recap: %s changed %d", h, s.Changed)
			}
		}
	}

	// delete: the hosts are as before the install.
	res = kx.play(ctx, del)
	if res.err != nil {
		t.Fatalf("delete failed: %v%s", res.err, res.failures())
	}
	t.Logf("delete: %s", res.wall.Round(time.Millisecond))
	for _, h := range set.Hosts {
		if d := diffSnapshots(fresh[h.Name], snapshot(ctx, t, set, h.Name, wide...)); len(d) > 0 {
			t.Errorf("after delete %s differs from before the install:\n  %s", h.Name, strings.Join(d, "\n  "))
		}
		if u := unitState(ctx, t, set, h.Name); u != freshUnits[h.Name] {
			t.Errorf("after delete the unit files of %s differ:\nbefore:\n%s\nafter:\n%s", h.Name, freshUnits[h.Name], u)
		}
	}

	// A create killed during the etcd role, then resumed.
	res = kx.playUntil(ctx, func(e event) bool {
		return e.Kind == "task_start" && e.Role == "etcd" && strings.HasPrefix(e.Task, "etcd - binaries")
	}, create, tags)
	if res.err != nil {
		t.Fatalf("the run to be killed failed on its own: %v%s", res.err, res.failures())
	}
	if res.recap() != nil {
		t.Fatal("the run finished before it reached the etcd role's distribution; nothing was killed")
	}
	res = kx.play(ctx, create, tags, "--resume")
	if res.err != nil {
		t.Fatalf("--resume failed: %v%s", res.err, res.failures())
	}
	resumed := 0
	for _, e := range res.events {
		if e.Kind == "host_result" && e.Resumed {
			resumed++
		}
	}
	if resumed == 0 {
		t.Error("--resume took no outcome from the killed run's journal")
	}
	t.Logf("killed during the etcd role, resumed in %s (%d outcomes from the journal)", res.wall.Round(time.Millisecond), resumed)
	checkEtcd(ctx, t, set)

	// The upgrade fetches etcdVersion's release from the same server.
	up := kx
	up.extra = append([]string{`{"etcd_mirrors": ["` + server + `/etcd-io/etcd/releases/download/` + etcdVersion + `"]}`}, kx.extra[1:]...)
	etcdUpgrade(ctx, t, root, set, up)
}

// etcdUpgrade is issue 53's etcd acceptance on the running v3.6 cluster:
// keys written, cluster.yaml set to v3.7, playbooks/upgrade-etcd run while
// a client on the last machine writes through all three members every
// 200 ms (failed requests and the longest gap between two answers
// counted); then every member runs v3.7 with the keys intact, a re-run
// changes nothing, and a downgrade and a skipped minor are refused before
// anything changes, naming the versions.
func etcdUpgrade(ctx context.Context, t *testing.T, root string, set *testhosts.Set, kx kubexm) {
	t.Helper()
	var eps []string
	for _, h := range set.Hosts {
		eps = append(eps, "https://"+net.JoinHostPort(h.Address, "2379"))
	}
	first, last := set.Hosts[0].Name, set.Hosts[len(set.Hosts)-1].Name
	const keys = 100
	ssl := "/etc/kubexm/etcd/ssl"
	if out, err := set.SSH(ctx, first, fmt.Sprintf(`set -e
for i in $(seq 1 %d); do
  ETCDCTL_API=3 /usr/local/bin/etcdctl --endpoints=%s --cacert=%s/ca.pem --cert=%s/admin-%s.pem --key=%s/admin-%s-key.pem put "/kubexm-e2e/upgrade/k$i" "v$i" >/dev/null
done`, keys, eps[0], ssl, ssl, first, ssl, first)); err != nil {
		t.Fatalf("writing %d keys: %v\n%s", keys, err, out)
	}
	setEtcdVersion(t, kx.inventory, etcdVersion)
	upgrade := filepath.Join(root, "playbooks", "upgrade-etcd")

	// create-cluster keeps the minor the members run: the next minor in
	// cluster.yaml (or kubexm's default moving to it) is refused before
	// anything changes, pointing at upgrade-etcd.
	res := kx.play(ctx, filepath.Join(root, "playbooks", "create-cluster"), "--tags=preflight,os,etcd")
	if res.err == nil {
		t.Fatalf("create-cluster with etcd %s on the %s members passed; want it refused", etcdVersion, etcdPreviousVersion)
	}
	if f := res.failures(); !strings.Contains(f, "create-cluster and add-nodes keep etcd's minor version. Upgrade with `kubexm play upgrade-etcd") {
		t.Errorf("create-cluster with etcd %s failed without naming upgrade-etcd:%s", etcdVersion, f)
	}
	for _, c := range res.changed() {
		if strings.Contains(c, ": etcd") {
			t.Errorf("the refused create-cluster changed %s", c)
		}
	}
	if v := etcdVersions(ctx, t, set, first, eps); !allAt(v, etcdPreviousVersion, len(set.Hosts)) {
		t.Errorf("after the refused create-cluster the members run %v, want %s everywhere", v, etcdPreviousVersion)
	}

	// --check: the pre-checks pass, nothing is backed up or restarted.
	res = kx.play(ctx, upgrade, "--check")
	if res.err != nil {
		t.Fatalf("upgrade-etcd --check failed: %v%s", res.err, res.failures())
	}
	if n := len(backupArchives(t, kx)); n != 0 {
		t.Errorf("upgrade-etcd --check wrote %d backups", n)
	}
	if v := etcdVersions(ctx, t, set, first, eps); !allAt(v, etcdPreviousVersion, len(set.Hosts)) {
		t.Errorf("after upgrade-etcd --check the members run %v, want %s everywhere", v, etcdPreviousVersion)
	}
	t.Logf("upgrade-etcd --check: %s, %d tasks would change something", res.wall.Round(time.Millisecond), len(res.changed()))

	poll := startEtcdPoller(ctx, t, set, last, strings.Join(eps, ","))
	res = kx.play(ctx, upgrade)
	stats, pollErr := poll.stop()
	if res.err != nil {
		t.Fatalf("upgrade-etcd to %s failed after %s: %v%s", etcdVersion, res.wall, res.err, res.failures())
	}
	if pollErr != nil {
		t.Fatal(pollErr)
	}
	handovers := 0
	for _, e := range res.events {
		if e.Kind == "host_result" && e.Status == "changed" && strings.HasPrefix(e.Task, "etcd - hand the leadership over") {
			handovers++
		}
	}
	t.Logf("PERF upgrade-etcd %s -> %s on 3 members: %s (%d changed, leadership handed over %d time(s)); "+
		"a client writing every 200 ms: %d requests, %d failed, longest gap between answers %s; slowest tasks:\n%s",
		etcdPreviousVersion, etcdVersion, res.wall.Round(time.Millisecond), len(res.changed()), handovers,
		stats.total, stats.failed, stats.longestGap.Round(time.Millisecond), res.slowest(5))
	for _, o := range stats.outages {
		t.Logf("  client outage: %s", o)
	}
	if stats.failed*100 > stats.total {
		t.Errorf("%d of %d writes failed during the upgrade, want at most 1%%", stats.failed, stats.total)
	}
	if handovers > 1 {
		t.Errorf("the leadership was handed over %d times, want at most once (the leader restarts last)", handovers)
	}
	if len(backupArchives(t, kx)) == 0 {
		t.Error("the upgrade took no backup before it changed etcd")
	}

	// Every member runs the new version, with the keys written before.
	if v := etcdVersions(ctx, t, set, first, eps); !allAt(v, etcdVersion, len(set.Hosts)) {
		t.Errorf("after the upgrade the members run %v, want %s everywhere", v, etcdVersion)
	}
	got, err := etcdctl(ctx, set, last, eps[len(eps)-1], "get --prefix /kubexm-e2e/upgrade/ --print-value-only")
	if n := strings.Count(got, "\n"); err != nil || n != keys || !strings.Contains(got, fmt.Sprintf("v%d\n", keys)) {
		t.Errorf("after the upgrade %d of the %d keys read back (%v):\n%s", n, keys, err, got)
	}
	checkEtcd(ctx, t, set)

	// At the target: nothing to do, and no second backup.
	before := len(backupArchives(t, kx))
	res = kx.play(ctx, upgrade)
	if res.err != nil {
		t.Fatalf("upgrade-etcd re-run failed: %v%s", res.err, res.failures())
	}
	t.Logf("PERF upgrade-etcd re-run at %s (nothing to change): %s", etcdVersion, res.wall.Round(time.Millisecond))
	if c := res.changed(); len(c) > 0 {
		t.Errorf("upgrade-etcd re-run changed %d things, want 0:\n  %s", len(c), strings.Join(c, "\n  "))
	}
	if n := len(backupArchives(t, kx)); n != before {
		t.Errorf("the re-run at the target took a backup (%d archives, %d before)", n, before)
	}

	// Refused before anything changes: back to 3.6, and a minor skipped
	// (-e etcd_version: cluster.yaml's matrix refuses v3.9 itself).
	setEtcdVersion(t, kx.inventory, etcdPreviousVersion)
	res = kx.play(ctx, upgrade)
	want := fmt.Sprintf("etcd downgrade refused: member %s runs etcd %s, cluster.yaml asks for %s", first, etcdVersion, etcdPreviousVersion)
	if res.err == nil || !strings.Contains(res.failures(), want) {
		t.Errorf("upgrade-etcd to %s: %v, want a refusal with %q:%s", etcdPreviousVersion, res.err, want, res.failures())
	}
	if c := res.changed(); len(c) > 0 {
		t.Errorf("the refused downgrade changed things:\n  %s", strings.Join(c, "\n  "))
	}
	setEtcdVersion(t, kx.inventory, etcdVersion)
	res = kx.play(ctx, upgrade, "-e", "etcd_version=v3.9.0")
	want = fmt.Sprintf("etcd member %s runs %s: %s to v3.9.0 skips a minor; etcd upgrades one minor at a time (to v3.8 first)", first, etcdVersion, etcdVersion)
	if res.err == nil || !strings.Contains(res.failures(), want) {
		t.Errorf("upgrade-etcd to v3.9.0: %v, want a refusal with %q:%s", res.err, want, res.failures())
	}
	if c := res.changed(); len(c) > 0 {
		t.Errorf("the refused skip of a minor changed things:\n  %s", strings.Join(c, "\n  "))
	}
	checkEtcd(ctx, t, set)
}

// setEtcdVersion writes spec.etcd.version into the test's cluster.yaml.
func setEtcdVersion(t *testing.T, inventory, version string) {
	t.Helper()
	data, err := os.ReadFile(inventory)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, "    version: v3.") {
			continue
		}
		out = append(out, l)
		if l == "    type: kubexm" {
			out = append(out, "    version: "+version)
		}
	}
	if err := os.WriteFile(inventory, []byte(strings.Join(out, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
}

// backupArchives are the backups in the test cluster's work directory.
func backupArchives(t *testing.T, kx kubexm) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(kx.dir, ".kubexm", "*", "backups", "*.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// etcdPoller is a client on a test machine writing a key through the given
// endpoints every 200 ms until stopped, with a copy of etcdctl (the upgrade
// replaces /usr/local/bin/etcdctl under it). It prints pollScript's
// "<unix ms> <code>" lines for parsePoll: 200 for an answer, 000:<exit code>
// for a failed write. It makes at least pollMinRequests writes whenever it is
// stopped: a quick upgrade on a loaded machine (each etcdctl taking 100 ms
// or more) left a fixed 15 s of polling short of parsePoll's 50.
type etcdPoller struct {
	set  *testhosts.Set
	host string
	done chan struct{}
	out  string
	err  error
}

func startEtcdPoller(ctx context.Context, t *testing.T, set *testhosts.Set, host, endpoints string) *etcdPoller {
	t.Helper()
	ssl := "/etc/kubexm/etcd/ssl"
	if _, err := set.SSH(ctx, host, "rm -f /tmp/kubexm-etcd-poll.stop"); err != nil {
		t.Fatal(err)
	}
	p := &etcdPoller{set: set, host: host, done: make(chan struct{})}
	script := fmt.Sprintf(`set -u
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
cp /usr/local/bin/etcdctl "$d/etcdctl"
i=0
while [ $i -lt %d ] || { [ ! -e /tmp/kubexm-etcd-poll.stop ] && [ $i -lt 6000 ]; }; do
  i=$((i + 1))
  if ETCDCTL_API=3 "$d/etcdctl" --endpoints=%s --cacert=%s/ca.pem --cert=%s/admin-%s.pem --key=%s/admin-%s-key.pem \
      --dial-timeout=2s --command-timeout=5s put /kubexm-e2e/poll "$i" >/dev/null 2>&1; then
    echo "$(date +%%s%%3N) 200"
  else
    echo "$(date +%%s%%3N) 000:$?"
  fi
  sleep 0.2
done`, pollMinRequests, endpoints, ssl, ssl, host, ssl, host)
	go func() {
		defer close(p.done)
		p.out, p.err = set.SSH(ctx, host, script)
	}()
	return p
}

// stop ends the poll, after pollMinRequests writes at least, and reads what it
// saw.
func (p *etcdPoller) stop() (pollStats, error) {
	if out, err := p.set.SSH(context.Background(), p.host, "touch /tmp/kubexm-etcd-poll.stop"); err != nil {
		return pollStats{}, fmt.Errorf("stopping the etcd poller on %s: %w\n%s", p.host, err, out)
	}
	<-p.done
	if p.err != nil {
		return pollStats{}, fmt.Errorf("the etcd poller on %s: %w\n%s", p.host, p.err, p.out)
	}
	return parsePoll(p.out, time.Time{})
}

// etcdVersions is the version of each member that answers `etcdctl
// endpoint status`, by endpoint.
func etcdVersions(ctx context.Context, t *testing.T, set *testhosts.Set, host string, eps []string) map[string]string {
	t.Helper()
	out, err := etcdctl(ctx, set, host, strings.Join(eps, ","), "endpoint status -w json")
	if err != nil {
		t.Fatalf("etcdctl endpoint status: %v\n%s", err, out)
	}
	var status []struct {
		Endpoint string `json:"Endpoint"`
		Status   struct {
			Version string `json:"version"`
		} `json:"Status"`
	}
	if err := json.Unmarshal([]byte(out), &status); err != nil {
		t.Fatalf("endpoint status output %q: %v", out, err)
	}
	versions := map[string]string{}
	for _, st := range status {
		versions[st.Endpoint] = st.Status.Version
	}
	return versions
}

// allAt reports whether n members answered, each at version.
func allAt(versions map[string]string, version string, n int) bool {
	if len(versions) != n {
		return false
	}
	for _, v := range versions {
		if "v"+v != version {
			return false
		}
	}
	return true
}
