//go:build integration

package steptest

import (
	"context"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/engine/transport/local"
	"github.com/mensylisir/kubexm/engine/transport/ssh"
	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/test/testhosts"
)

// Machines are the test machines of the environment (test/hosts).
func Machines(t testing.TB) *testhosts.Set {
	t.Helper()
	set, err := testhosts.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func RemoteEnv(t testing.TB, set *testhosts.Set, i int) *step.Env {
	t.Helper()
	h := set.Hosts[i]
	tr, err := ssh.Dial(t.Context(), &inventory.Host{Name: h.Name, Address: h.Address, Port: h.Port, User: "root", PrivateKeyPath: set.KeyPath},
		ssh.Options{HostKeyChecking: ssh.Off})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	env, _ := Env(t)
	env.Host = h.Name
	env.Target = tr
	env.Control = local.New("localhost")
	return env
}

// Sh runs a script on the machine and returns its trimmed stdout.
func Sh(t *testing.T, env *step.Env, script string) string {
	t.Helper()
	res, err := env.Target.Run(context.Background(), transport.Command{Script: script})
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(res.Stdout))
}

// ConvergeRemote: check mode must leave probe's answer unchanged, the first
// Run changes, the second does not.
func ConvergeRemote(t *testing.T, b step.Builtin, env *step.Env, args step.Args, probe string) {
	t.Helper()
	before := Sh(t, env, probe)
	env.Check = true
	if res := Run(t, b, env, args); !res.Changed {
		t.Fatalf("%s check: want changed, got %+v", b.Spec().Name, res)
	}
	env.Check = false
	if after := Sh(t, env, probe); after != before {
		t.Fatalf("%s: check mode changed the host: %q -> %q", b.Spec().Name, before, after)
	}
	if res := Run(t, b, env, args); !res.Changed {
		t.Fatalf("%s first: want changed, got %+v", b.Spec().Name, res)
	}
	if res := Run(t, b, env, args); res.Changed {
		t.Fatalf("%s second: want unchanged, got %+v", b.Spec().Name, res)
	}
}
