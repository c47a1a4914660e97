package cli

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/schema/matrix"

	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/lifecycle"
)

// exitTransport is a remote host whose every command exits with code.
type exitTransport struct {
	transport.Transport
	name string
	code int
	got  *[]string
}

func (t exitTransport) Host() string { return t.name }
func (t exitTransport) Close() error { return nil }
func (t exitTransport) Run(_ context.Context, c transport.Command) (transport.Result, error) {
	*t.got = append(*t.got, strings.Join(c.Argv, "|"))
	return transport.Result{Stdout: []byte("remote out\n"), ExitCode: t.code}, nil
}

func runApp(remote *[]string) *app {
	return newApp(lifecycle.Runner{
		LoadInventory: func(*lifecycle.ClusterFile, *matrix.Support) (*inventory.Inventory, error) {
			return &inventory.Inventory{
				Hosts: []inventory.Host{
					{Name: "n1", Local: true, Password: "s3cret-pw"},
					{Name: "n2", Local: true},
					{Name: "r1", Address: "192.0.2.10"},
					{Name: "dead", Address: "192.0.2.11"},
				},
				Groups: map[string][]string{"master": {"n1"}, "worker": {"n2", "r1"}},
				Vars:   map[string]any{"cluster_name": "demo"},
			}, nil
		},
		Connect: func(_ context.Context, h *inventory.Host) (transport.Transport, error) {
			if h.Name == "dead" {
				return nil, errors.New("dial tcp 192.0.2.11:22: connection refused")
			}
			return exitTransport{name: h.Name, code: 5, got: remote}, nil
		},
	})
}

func runCommandCmd(t *testing.T, a *app, args ...string) (string, error) {
	t.Helper()
	return runVerb(t, a, "", append([]string{"run", "command", "-f", "cluster.yaml"}, args...)...)
}

func TestRunCommand(t *testing.T) {
	t.Chdir(t.TempDir()) // the runs' journals go to .kubexm/demo
	var remote []string
	a := runApp(&remote)

	// Each argument reaches the program as it is: nothing is spliced into
	// a shell line; secrets of the file are masked in the output.
	out, err := runCommandCmd(t, a, "--group", "master", "--nodes", "n2", "--", "printf", "%s|", "a b", "$(id)", ";", "s3cret-pw")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	for _, want := range []string{"n1 | ok | rc=0 >>\na b|$(id)|;|********|\n", "n2 | ok | rc=0 >>\na b|$(id)|;|********|\n", "2 hosts: 2 ok, 0 failed, 0 unreachable"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "s3cret") {
		t.Errorf("a secret in the output:\n%s", out)
	}

	// A non-zero exit on a remote host: its output and code, exit status 2.
	out, err = runCommandCmd(t, a, "--nodes", "worker", "--", "true")
	var ee *lifecycle.ExitError
	if !errors.As(err, &ee) || ee.Code != 2 || !strings.Contains(err.Error(), "r1") {
		t.Errorf("failed host: %v\n%s", err, out)
	}
	if !strings.Contains(out, "r1 | FAILED | rc=5 >>\nremote out\n") || !strings.Contains(out, "n2 | ok") || strings.Join(remote, ",") != "true" {
		t.Errorf("failed host output:\n%s (remote %q)", out, remote)
	}

	// An unreachable host alone: exit status 4, the reason per host; JSON lines.
	out, err = runCommandCmd(t, a, "--nodes", "dead,n1", "-o", "json", "--", "true")
	if !errors.As(err, &ee) || ee.Code != 4 {
		t.Errorf("unreachable: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 2 hosts and a summary:\n%s", out)
	}
	byHost := map[string]lifecycle.HostRun{}
	for _, l := range lines[:2] {
		var r lifecycle.HostRun
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		byHost[r.Host] = r
	}
	if byHost["dead"].Status != "unreachable" || !strings.Contains(byHost["dead"].Error, "connection refused") || byHost["n1"].Status != "ok" {
		t.Errorf("json results: %+v", byHost)
	}
	if !strings.Contains(lines[2], `"kind":"summary"`) || !strings.Contains(lines[2], `"unreachable":["dead"]`) {
		t.Errorf("summary: %s", lines[2])
	}

	// --shell runs one argument with /bin/sh -c.
	if out, err := runCommandCmd(t, a, "--nodes", "n1", "--shell", "--", "echo a | tr a b"); err != nil || !strings.Contains(out, "\nb\n") {
		t.Errorf("--shell: %v\n%s", err, out)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--nodes", "n1", "uptime"}, "after --"},
		{[]string{"--", "uptime"}, "choose the hosts"},
		{[]string{"--nodes", "n9", "--", "uptime"}, "n9 matches no host"},
		{[]string{"--group", "etcd", "--", "uptime"}, "no such group"},
		{[]string{"--nodes", "n1", "--", "systemctl status etcd"}, "add --shell"},
		{[]string{"--nodes", "n1", "--shell", "--", "a", "b"}, "one argument"},
	} {
		remote = nil
		if _, err := runCommandCmd(t, a, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v, want %q", c.args, err, c.want)
		}
		if len(remote) != 0 {
			t.Errorf("%v: ran %q after refusing", c.args, remote)
		}
	}
}

// TestRunCommandIsAPlay: run command is a play of one task, so --limit
// takes a pattern as kubexm play's does, and the run is journaled where
// kubexm get runs and kubexm logs find it, the secret kept out.
func TestRunCommandIsAPlay(t *testing.T) {
	verbDir(t)
	var remote []string
	a := runApp(&remote)
	out, err := runCommandCmd(t, a, "--nodes", "all", "--limit", "worker:!dead", "--", "echo", "s3cret-pw")
	var ee *lifecycle.ExitError
	if !errors.As(err, &ee) || ee.Code != 2 {
		t.Fatalf("--limit worker:!dead: %v\n%s", err, out)
	}
	if !strings.Contains(out, "n2 | ok | rc=0 >>\n********\n") || !strings.Contains(out, "r1 | FAILED | rc=5 >>\nremote out\n") ||
		strings.Contains(out, "n1 |") || strings.Contains(out, "dead |") || !strings.Contains(out, "2 hosts: 1 ok, 1 failed, 0 unreachable") {
		t.Errorf("--limit worker:!dead ran elsewhere:\n%s", out)
	}
	if _, err := runCommandCmd(t, a, "--nodes", "n1", "--limit", "n9", "--", "true"); err == nil || !strings.Contains(err.Error(), `--limit "n9" matches no host`) {
		t.Errorf("--limit n9: %v", err)
	}

	out, err = runVerb(t, a, "", "get", "runs", "-f", "cluster.yaml")
	if err != nil || !strings.Contains(out, "run-command") || !strings.Contains(out, "failed") {
		t.Errorf("get runs: %v\n%s", err, out)
	}
	out, err = runVerb(t, a, "", "logs", "last", "-f", "cluster.yaml")
	if err != nil || !strings.Contains(out, "playbook run-command") || !regexp.MustCompile(`r1 +failed .* rc=5  command`).MatchString(out) ||
		!regexp.MustCompile(`n2 +changed .* rc=0  command`).MatchString(out) || strings.Contains(out, "s3cret") {
		t.Errorf("logs last: %v\n%s", err, out)
	}
}
