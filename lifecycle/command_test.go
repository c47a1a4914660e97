package lifecycle

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/schema/matrix"

	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/inventory"
)

func commandRunner() Runner {
	return Runner{
		LoadInventory: func(*ClusterFile, *matrix.Support) (*inventory.Inventory, error) {
			return &inventory.Inventory{
				Hosts: []inventory.Host{{Name: "n1", Local: true, Password: "s3cret-pw"}, {Name: "n2", Local: true},
					{Name: "dead", Address: "192.0.2.11"}},
				Groups: map[string][]string{"master": {"n1"}, "worker": {"n2", "dead"}},
			}, nil
		},
		Connect: func(context.Context, *inventory.Host) (transport.Transport, error) {
			return nil, errors.New("connection refused")
		},
	}
}

// TestRunCommandOutcomes: each host's outcome, the secrets masked, and the
// exit status the outcomes mean (4 for a host not reached alone).
func TestRunCommandOutcomes(t *testing.T) {
	r := commandRunner()
	cr, err := r.PrepareCommand(CommandRequest{Inventory: "cluster.yaml", Nodes: []string{"n1", "dead"}, Argv: []string{"echo", "s3cret-pw"}, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var told int
	results, err := r.RunCommand(context.Background(), cr, func(HostRun) { told++ })
	if err != nil {
		t.Fatal(err)
	}
	s := SummarizeCommand(results)
	if told != 2 || strings.Join(s.OK, ",") != "n1" || strings.Join(s.Unreachable, ",") != "dead" {
		t.Fatalf("told %d, summary %+v", told, s)
	}
	if results[0].Host != "dead" || results[0].RC != -1 || !strings.Contains(results[0].Error, "connection refused") {
		t.Errorf("dead: %+v", results[0])
	}
	if results[1].Host != "n1" || results[1].Stdout != "********\n" || results[1].RC != 0 {
		t.Errorf("n1: %+v", results[1])
	}
	var ee *ExitError
	if err := s.Err(); !errors.As(err, &ee) || ee.Code != 4 {
		t.Errorf("unreachable alone: %v", err)
	}
	if err := (CommandSummary{Failed: []string{"a"}, Unreachable: []string{"b"}}).Err(); !errors.As(err, &ee) || ee.Code != 2 {
		t.Errorf("failed and unreachable: %v", err)
	}
	if err := (CommandSummary{OK: []string{"a"}}).Err(); err != nil {
		t.Errorf("all ok: %v", err)
	}
}

// TestRunCommandIsARun: the command runs as a play of one task, so it is
// journaled in the work directory (kubexm get runs and kubexm logs read
// it) with each host's exit status, the failure's message and output,
// and nothing of a secret; a failing command's exit status and its
// output reach the caller; a cancelled command exits 130.
func TestRunCommandIsARun(t *testing.T) {
	r := commandRunner()
	dir := t.TempDir()
	cr, err := r.PrepareCommand(CommandRequest{Inventory: "cluster.yaml", Groups: []string{"worker"}, Limit: "n*", Shell: true,
		Argv: []string{`echo "out $1"; echo err >&2; exit 3`}, WorkDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	results, err := r.RunCommand(context.Background(), cr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || results[0].Host != "n2" || results[0].Status != "failed" || results[0].RC != 3 ||
		results[0].Stdout != "out \n" || results[0].Stderr != "err\n" || results[0].Error != "" {
		t.Fatalf("--group worker --limit n*: %+v", results)
	}
	runs, err := engine.Runs(dir)
	if err != nil || len(runs) != 1 || runs[0].Playbook != "run-command" || runs[0].Outcome != "failed" {
		t.Fatalf("runs of the work directory: %+v %v", runs, err)
	}
	_, log, err := engine.RunLog(dir, runs[0].ID)
	if err != nil || len(log) != 1 || log[0].Host != "n2" || log[0].RC == nil || *log[0].RC != 3 || log[0].StdoutTail != "out " || log[0].StderrTail != "err" {
		t.Errorf("its log: %+v %v", log, err)
	}

	// A secret in the output: masked for the caller, kept out of the journal.
	cr, err = r.PrepareCommand(CommandRequest{Inventory: "cluster.yaml", Nodes: []string{"n1"}, Argv: []string{"sh", "-c", "echo $0; exit 1", "s3cret-pw"}, WorkDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	results, err = r.RunCommand(context.Background(), cr, nil)
	if err != nil || len(results) != 1 || results[0].Stdout != "********\n" || results[0].RC != 1 {
		t.Fatalf("a secret in the output: %+v %v", results, err)
	}
	runs, _ = engine.Runs(dir)
	data, err := os.ReadFile(filepath.Join(dir, "runs", runs[len(runs)-1].ID, "journal.jsonl"))
	if err != nil || strings.Contains(string(data), "s3cret") {
		t.Errorf("the journal holds the secret (or is not there: %v):\n%s", err, data)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cr, err = r.PrepareCommand(CommandRequest{Inventory: "cluster.yaml", Nodes: []string{"n1"}, Argv: []string{"sleep", "20"}, WorkDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	var ee *ExitError
	if _, err := r.RunCommand(ctx, cr, nil); !errors.As(err, &ee) || ee.Code != 130 || time.Since(start) > 10*time.Second {
		t.Errorf("cancelled: %v after %s", err, time.Since(start))
	}
}

func TestPrepareCommandRefuses(t *testing.T) {
	r := commandRunner()
	for _, c := range []struct {
		req  CommandRequest
		want string
	}{
		{CommandRequest{Argv: []string{"uptime"}}, "choose the hosts"},
		{CommandRequest{Nodes: []string{"n9"}, Argv: []string{"uptime"}}, "n9 matches no host"},
		{CommandRequest{Groups: []string{"etcd"}, Argv: []string{"uptime"}}, "no such group"},
		{CommandRequest{Nodes: []string{"n1"}, Argv: []string{"systemctl status etcd"}}, "add --shell"},
		{CommandRequest{Nodes: []string{"n1"}, Shell: true, Argv: []string{"a", "b"}}, "one argument"},
		{CommandRequest{Nodes: []string{"n1"}, Limit: "n9", Argv: []string{"uptime"}}, `--limit "n9" matches no host`},
		{CommandRequest{Nodes: []string{"n1"}, Limit: "worker", Argv: []string{"uptime"}}, "leaves none of the hosts"},
	} {
		if _, err := r.PrepareCommand(c.req); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want %q", c.req, err, c.want)
		}
	}
	cr, err := r.PrepareCommand(CommandRequest{Groups: []string{"master[0]"}, Shell: true, Argv: []string{"df -h | tail -1"}, BecomeUser: "app"})
	if err != nil || cr.Command.Script != "df -h | tail -1" || !cr.Command.Become || strings.Join(cr.Hosts, ",") != "n1" {
		t.Errorf("shell on master[0]: %+v %v", cr, err)
	}
	cr, err = r.PrepareCommand(CommandRequest{Nodes: []string{"all"}, Limit: "all:!dead", Argv: []string{"uptime"}})
	if err != nil || strings.Join(cr.Hosts, ",") != "n1,n2" {
		t.Errorf("--nodes all --limit all:!dead: %+v %v", cr, err)
	}
}

// Local, the Executor of this machine, runs a prepared command as
// RunCommand does.
func TestLocalCommand(t *testing.T) {
	r := commandRunner()
	req := CommandRequest{Inventory: "cluster.yaml", Nodes: []string{"n1"}, Argv: []string{"echo", "hi"}, WorkDir: t.TempDir()}
	cr, err := r.PrepareCommand(req)
	if err != nil {
		t.Fatal(err)
	}
	var x Executor = Local{r}
	results, err := x.Command(context.Background(), req, cr, func(HostRun) {})
	if err != nil || len(results) != 1 || results[0].Stdout != "hi\n" {
		t.Errorf("Command = %+v, %v", results, err)
	}
}
