//go:build integration

package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/lifecycle"
)

// run command over SSH on two test machines: every argument arrives as it
// is (the SSH transport quotes it), output and exit status per host, exit
// status 2 when the command failed somewhere.
func TestRunCommandOverSSH(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	set := ownMachines(ctx, t, 2)
	t.Setenv("KUBEXM_HOME", t.TempDir())
	t.Chdir(t.TempDir())
	run := func(args ...string) (string, error) {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append([]string{"run", "command", "-f", set.InventoryPath}, args...))
		err := root.ExecuteContext(ctx)
		return out.String(), err
	}

	start := time.Now()
	out, err := run("--nodes", "all", "--", "printf", "%s|", "a b", "$(id -u)", "it's", ";", "*")
	t.Logf("run command on 2 machines over SSH: %s", time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	for _, h := range []string{"n1", "n2"} {
		if !strings.Contains(out, h+" | ok | rc=0 >>\na b|$(id -u)|it's|;|*|\n") {
			t.Errorf("%s: arguments changed on the way:\n%s", h, out)
		}
	}

	out, err = run("--group", "worker", "--shell", "--", "echo on $(hostname); exit 7")
	var ee *lifecycle.ExitError
	if !errors.As(err, &ee) || ee.Code != 2 || !strings.Contains(out, "n2 | FAILED | rc=7 >>\non ") || strings.Contains(out, "n1 |") {
		t.Errorf("failing command: %v\n%s", err, out)
	}
}
