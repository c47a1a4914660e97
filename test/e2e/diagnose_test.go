//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/test/testhosts"
)

// The switches every e2e suite honours.
const (
	// envKeepMachines=1 leaves a suite's machines running after it ends, and
	// prints how to reach them and how to take them down.
	envKeepMachines = "KUBEXM_KEEP_MACHINES"
	// envPrefix names a suite's runs: <value><one letter per suite>, so that
	// a machine's run can be told apart from everyone else's on a shared
	// host (at most 7 characters of [a-z0-9]); random when unset.
	envPrefix = "KUBEXM_E2E_PREFIX"
	// envExtraVars adds one -e argument (JSON or key=value) to every kubexm
	// run of the suites, e.g. to inject a broken setting on purpose:
	//   KUBEXM_E2E_VARS='{"kube_proxy_extra_config": {"mode": "bogus"}}'
	envExtraVars = "KUBEXM_E2E_VARS"
)

// The machines' units kubexm writes carry this header (roles/*/templates).
const managedUnitMark = "# Managed by kubexm"

// suiteMachines brings up n test machines for a suite, named after tag (one
// letter), and registers, in this order of running at the end of the test:
// the first failure's mark (markFirstFailure), the failure report
// (diagnostics.report) and the teardown, which KUBEXM_KEEP_MACHINES=1
// skips. env adds settings of up.sh.
func suiteMachines(ctx context.Context, t *testing.T, n int, tag string, env ...string) (*testhosts.Set, *diagnostics) {
	t.Helper()
	prefix, err := suitePrefix(tag)
	if err != nil {
		t.Fatal(err)
	}
	d := &diagnostics{prefix: prefix}
	// Cleanups run last-registered first: the report must see the machines,
	// so it is registered after the teardown.
	t.Cleanup(func() {
		if os.Getenv(envKeepMachines) == "1" {
			t.Log(d.keepHint())
			return
		}
		if err := testhosts.Down(context.Background(), prefix); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			d.report(t)
		}
	})
	markFirstFailure(t)
	set, err := testhosts.Up(ctx, n, prefix, env...)
	if err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	d.set = set
	d.mu.Unlock()
	return set, d
}

// firstFailureMark follows, within a second, the first t.Errorf or
// t.Fatalf of a suite. A suite goes on after a t.Errorf and logs much more;
// test/failed-tests.sh, which CI prints last, shows the lines before this
// mark.
const firstFailureMark = "==== the first failure is above this line"

// markFirstFailure logs firstFailureMark once t has failed: a watcher sees a
// t.Errorf, and a cleanup registered after the failure report's, so run
// before it, sees a t.Fatalf, which ends the test at once.
func markFirstFailure(t *testing.T) {
	var once sync.Once
	mark := func() {
		if t.Failed() {
			once.Do(func() { t.Log(firstFailureMark) })
		}
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				mark()
			}
		}
	}()
	t.Cleanup(func() {
		close(done)
		<-stopped
		mark()
	})
}

// suitePrefix is $KUBEXM_E2E_PREFIX followed by the suite's tag, or a random
// prefix.
func suitePrefix(tag string) (string, error) {
	base := os.Getenv(envPrefix)
	if base == "" {
		return testhosts.NewPrefix()
	}
	p := base + tag
	if !regexp.MustCompile(`^[a-z0-9]{1,8}$`).MatchString(p) {
		return "", fmt.Errorf("%s=%q: the run prefix %q must be 1-8 characters of [a-z0-9]; give at most 7", envPrefix, base, p)
	}
	return p, nil
}

// extraVars is the suite's -e arguments plus $KUBEXM_E2E_VARS.
func extraVars(vars ...string) []string {
	if v := os.Getenv(envExtraVars); v != "" {
		vars = append(vars, v)
	}
	return vars
}

// diagnostics gathers, while a suite runs, what its failure report needs:
// the tasks that failed in its kubexm runs and how to reach its cluster.
type diagnostics struct {
	mu      sync.Mutex
	prefix  string
	set     *testhosts.Set
	failed  []event        // the last run's host_result events that failed or were unreachable
	kubectl *kubectlRunner // the cluster's API, once the suite has one
}

// observe records the failed tasks of a kubexm run (kubexm.observe); the
// last run's are the ones the report names, so that a failure a test
// provoked on purpose earlier does not point at the wrong unit.
func (d *diagnostics) observe(r runResult) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failed = nil
	for _, e := range r.events {
		if e.Kind == "host_result" && (e.Status == "failed" || e.Status == "unreachable") {
			d.failed = append(d.failed, e)
		}
	}
}

// cluster tells the report where the suite's Kubernetes API is.
func (d *diagnostics) cluster(k kubectlRunner) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.kubectl = &k
}

// keepHint says how to reach kept machines and how to take them down.
func (d *diagnostics) keepHint() string {
	state := testhosts.StateDir(d.prefix)
	var b strings.Builder
	fmt.Fprintf(&b, "%s=1: the machines of run %s stay up.\n", envKeepMachines, d.prefix)
	fmt.Fprintf(&b, "  reach them:    ssh -F %s/ssh_config n1   (n2, n3, ...)\n", state)
	d.mu.Lock()
	k := d.kubectl
	d.mu.Unlock()
	// The test's directory goes away with the test; the run's state
	// directory stays until down.sh.
	if k != nil {
		if b2, err := os.ReadFile(k.kubeconfig); err == nil {
			kept := filepath.Join(state, "kubeconfig")
			if err := os.WriteFile(kept, b2, 0o600); err == nil {
				fmt.Fprintf(&b, "  the cluster:   %s --kubeconfig %s get nodes\n", k.bin, kept)
			}
		}
	}
	fmt.Fprintf(&b, "  take them down: sudo make hosts-down PREFIX=%s   (or PREFIX=%s test/hosts/down.sh)", d.prefix, d.prefix)
	return b.String()
}

// report logs what an engineer looks at first when a suite fails: on every
// machine the state of the units kubexm manages, and the status and the last
// 100 journal lines of each one that is not active or has restarted and of
// each one a failed task names; then, for a cluster, its nodes, pods and events.
func (d *diagnostics) report(t *testing.T) {
	t.Helper()
	// The test's own context may be spent already.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t.Log(d.text(ctx))
}

// text is the failure report.
func (d *diagnostics) text(ctx context.Context) string {
	d.mu.Lock()
	set, failed, k := d.set, append([]event(nil), d.failed...), d.kubectl
	d.mu.Unlock()
	if set == nil {
		return "failure report: the machines never came up; nothing to look at"
	}
	var b strings.Builder
	b.WriteString("==== failure report (what to look at first) ====\n")
	if len(failed) > 0 {
		b.WriteString("failed tasks:\n")
		for _, e := range failed {
			fmt.Fprintf(&b, "  %s [%s] %s: %s\n", e.Host, e.Role, e.Task, e.Message)
		}
	}
	for _, h := range set.Hosts {
		// The text of the tasks that failed here: a managed unit whose
		// name it contains is the failed task's unit.
		var named []string
		for _, e := range failed {
			if e.Host == h.Name {
				named = append(named, e.Task+" "+e.Message)
			}
		}
		out, err := set.SSH(ctx, h.Name, unitReportScript(strings.Join(named, "\n")))
		fmt.Fprintf(&b, "---- %s (%s) ----\n%s", h.Name, h.Address, out)
		if err != nil {
			fmt.Fprintf(&b, "(could not read %s's units: %v)\n", h.Name, err)
		}
	}
	if k != nil {
		b.WriteString("---- the cluster ----\n")
		if _, err := os.Stat(k.kubeconfig); err != nil {
			fmt.Fprintf(&b, "no kubeconfig yet (%s): the run failed before the control plane\n", filepath.Base(k.kubeconfig))
		} else {
			for _, args := range [][]string{
				{"get", "nodes,pods", "-A", "-o", "wide"},
				{"get", "events", "-A", "--sort-by=.lastTimestamp"},
			} {
				out, err := k.run(ctx, "", args...)
				fmt.Fprintf(&b, "$ kubectl %s\n%s\n", strings.Join(args, " "), tail(strings.TrimRight(out, "\n"), 80))
				if err != nil {
					fmt.Fprintf(&b, "(kubectl: %v)\n", err)
				}
			}
		}
	}
	b.WriteString("==== end of failure report ====")
	return b.String()
}

// unitReportScript prints, on a machine, one line per unit kubexm manages
// (state, sub-state, restarts), then `systemctl status` and the last 100
// journal lines of each that is not active, has restarted, or whose name the
// failed tasks' text names.
func unitReportScript(failedText string) string {
	return fmt.Sprintf(`failed_text=%s
units=$(grep -l -s -F -e %s /etc/systemd/system/*.service | xargs -r -n1 basename | sed 's/\.service$//')
if [ -z "$units" ]; then echo "no unit of kubexm's"; exit 0; fi
for u in $units; do
  printf '%%-26s %%s\n' "$u" "$(systemctl show -p ActiveState,SubState,NRestarts,ExecMainStatus "$u.service" | paste -sd' ')"
done
for u in $units; do
  why=
  systemctl is-active --quiet "$u.service" || why="not active"
  # A crash loop is active for the instant between restarts; its restarts give it away.
  restarts=$(systemctl show -p NRestarts --value "$u.service")
  [ "${restarts:-0}" = 0 ] || why="${why:+$why, }restarted $restarts times"
  case "$failed_text" in *"$u"*) why="${why:+$why, }named by the failed task" ;; esac
  [ -n "$why" ] || continue
  echo "## $u ($why)"
  echo "\$ systemctl status $u"
  systemctl status --no-pager --full --lines=0 "$u.service" 2>&1
  echo "\$ journalctl -u $u -n 100"
  journalctl -u "$u.service" -n 100 --no-pager -o short-precise 2>&1
done
`, shellQuote(failedText), shellQuote(managedUnitMark+" ("))
}

// shellQuote makes s one single-quoted shell word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// TestFailureReport checks the failure report on one machine: a unit of
// kubexm's that keeps failing is shown with its status and journal, a
// running one that a failed task names is shown too, and a running one
// nobody names is listed only.
func TestFailureReport(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	set, d := suiteMachines(ctx, t, 1, "r")
	h := set.Hosts[0].Name
	unit := func(name, script string) string {
		return fmt.Sprintf(`cat > /etc/systemd/system/%[1]s.service <<'UNIT'
%[2]s (e2e); edits are overwritten.
[Service]
ExecStart=/bin/sh -c %[3]s
Restart=always
RestartSec=1
UNIT
`, name, managedUnitMark, shellQuote(script))
	}
	if out, err := set.SSH(ctx, h, unit("e2e-broken", "echo bad flag --e2e-bogus >&2; exit 3")+
		unit("e2e-quiet", "echo quiet is listening; exec sleep 600")+
		unit("e2e-named", "echo named is up but not answering; exec sleep 600")+
		"systemctl daemon-reload && systemctl start e2e-broken e2e-quiet e2e-named && "+
		// Two restarts, however loaded the machine: the report must tell a crash loop from a blip.
		"until [ \"$(systemctl show -p NRestarts --value e2e-broken)\" -ge 2 ]; do sleep 0.2; done"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	d.observe(runResult{events: []event{{Kind: "host_result", Status: "failed", Host: h, Role: "e2e",
		Task: "e2e-named is alive", Message: "timed out waiting for url http://127.0.0.1:1/livez"}}})
	text := d.text(ctx)
	t.Logf("the report, as a failing suite would log it:\n%s", text)
	for _, want := range []string{
		"failed tasks:\n  n1 [e2e] e2e-named is alive: timed out",
		"$ systemctl status e2e-broken",
		"bad flag --e2e-bogus",
		"## e2e-named (named by the failed task)",
		"named is up but not answering",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the report lacks %q:\n%s", want, text)
		}
	}
	if !regexp.MustCompile(`(?m)^## e2e-broken \((not active, )?restarted [0-9]+ times\)$`).MatchString(text) {
		t.Errorf("the report does not show e2e-broken as crash-looping:\n%s", text)
	}
	if !regexp.MustCompile(`(?m)^e2e-quiet +.*ActiveState=active`).MatchString(text) {
		t.Errorf("the report does not list e2e-quiet as active:\n%s", text)
	}
	if strings.Contains(text, "## e2e-quiet") || strings.Contains(text, "quiet is listening") {
		t.Errorf("the report shows the journal of a healthy unit nobody named:\n%s", text)
	}
	if _, err := set.SSH(ctx, h, "systemctl stop e2e-broken e2e-quiet e2e-named"); err != nil {
		t.Error(err)
	}
}
