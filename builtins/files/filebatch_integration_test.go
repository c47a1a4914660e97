//go:build integration

package files

import (
	"fmt"
	"path"
	"testing"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"

	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/engine/transport/ssh"
	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/test/testhosts"
)

// BenchmarkFileLoopSSH is BenchmarkFileLoop on a test machine over SSH: a
// 10-item `file` loop (state directory) run item by item and in one batch,
// on a re-run (nothing to change) and on a fresh host (every directory
// made), logged in as root (Stat is one SFTP request) and through sudo
// (Stat is a command).
//
//	source <run>/hosts.env; go test -tags integration ./builtins -run '^$' -bench FileLoopSSH
func BenchmarkFileLoopSSH(b *testing.B) {
	set := steptest.Machines(b)
	env := steptest.RemoteEnv(b, set, 0)
	const items = 10
	dir := "/tmp/kubexm-fileloop"
	args := make([]step.Args, items)
	for i := range args {
		args[i] = step.Args{"path": path.Join(dir, fmt.Sprintf("d%d", i)), "state": "directory", "mode": "0755"}
	}
	for _, become := range []bool{false, true} {
		for _, fresh := range []bool{false, true} {
			for _, batched := range []bool{false, true} {
				b.Run(fmt.Sprintf("become=%v/fresh=%v/batched=%v", become, fresh, batched), func(b *testing.B) {
					e := *env
					e.Become = become
					if become {
						e.Target = sudoTarget(b, set)
					}
					e.Target = &slowHost{Transport: e.Target}
					benchFileLoop(b, &e, args, batched, func() {
						if !fresh {
							return
						}
						if _, err := env.Target.Run(b.Context(), transport.Command{Argv: []string{"rm", "-rf", dir}}); err != nil {
							b.Fatal(err)
						}
					})
				})
			}
		}
	}
}

// sudoTarget logs in to the first machine as the sudo user, whose become
// goes through sudo with a password.
func sudoTarget(b *testing.B, set *testhosts.Set) transport.Transport {
	h := set.Hosts[0]
	tr, err := ssh.Dial(b.Context(), &inventory.Host{Name: h.Name, Address: h.Address, Port: h.Port, User: set.SudoUser,
		PrivateKeyPath: set.KeyPath, BecomePassword: set.SudoPassword}, ssh.Options{HostKeyChecking: ssh.Off})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tr.Close() })
	return tr
}
