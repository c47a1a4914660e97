package lifecycle

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/schema/matrix"

	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/inventory"
)

func commandRunner() Runner {
	return Runner{
		LoadInventory: func(*ClusterFile, *matrix.Support) (*inventory.Inventory, error) {
			return &inventory.Inventory{
				Hosts:  []inventory.Host{{Name: "n1", Local: true, Password: "s3cret-pw"}, {Name: "dead", Address: "192.0.2.11"}},
				Groups: map[string][]string{"master": {"n1"}, "worker": {"dead"}},
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
	cr, err := r.PrepareCommand(CommandRequest{Inventory: "cluster.yaml", Nodes: []string{"all"}, Argv: []string{"echo", "s3cret-pw"}})
	if err != nil {
		t.Fatal(err)
	}
	var told int
	results := r.RunCommand(context.Background(), cr, func(HostRun) { told++ })
	s := SummarizeCommand(results)
	if told != 2 || strings.Join(s.OK, ",") != "n1" || strings.Join(s.Unreachable, ",") != "dead" {
		t.Fatalf("told %d, summary %+v", told, s)
	}
	if results[1].Host != "n1" || strings.Contains(results[1].Stdout, "s3cret") || !strings.Contains(results[1].Stdout, "********") {
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
	} {
		if _, err := r.PrepareCommand(c.req); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want %q", c.req, err, c.want)
		}
	}
	cr, err := r.PrepareCommand(CommandRequest{Groups: []string{"master[0]"}, Shell: true, Argv: []string{"df -h | tail -1"}, BecomeUser: "app"})
	if err != nil || cr.Command.Script != "df -h | tail -1" || !cr.Command.Become || strings.Join(cr.Hosts, ",") != "n1" {
		t.Errorf("shell on master[0]: %+v %v", cr, err)
	}
}
