// Command kubexm creates and runs Kubernetes clusters from one cluster.yaml by
// interpreting YAML playbooks over SSH.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm"
	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport/ssh"
	"github.com/mensylisir/kubexm/schema"
)

// version is the engine version playbooks declare in `requires:`; release
// builds set it with -ldflags "-X main.version=...".
var version = "0.1.0"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		var coded interface{ ExitCode() int }
		if errors.As(err, &coded) {
			os.Exit(coded.ExitCode())
		}
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "kubexm",
		Short:         "Create and run Kubernetes clusters from one cluster.yaml",
		Version:       version,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	// --version also says what this kubexm installs; `kubexm support` has
	// the whole matrix.
	if s, err := schema.BuiltinSupport(); err == nil {
		root.SetVersionTemplate("{{.Name}} version {{.Version}}\ninstalls Kubernetes " + s.KubernetesRange() + "; `kubexm support` lists every choice\n")
	}
	conn := &connector{}
	var policy string
	pf := root.PersistentFlags()
	pf.StringVar(&policy, "ssh-host-key-checking", string(ssh.AcceptNew),
		"strict (only hosts in known_hosts), accept-new (record new hosts in .kubexm/known_hosts) or off; a changed key is always refused")
	pf.IntVar(&conn.uploadForks, "upload-forks", 10, "how many file transfers run at once across all hosts")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		p, err := ssh.ParseHostKeyChecking(policy)
		conn.policy = p
		return err
	}
	a := &app{
		loadInventory: loadInventory,
		builtins:      builtinRegistry(),
		connect:       conn.connect,
		builtinFS:     kubexm.Content(),
	}
	root.AddCommand(newConfigCmd(), newCreateCmd(), newPlayCmd(a), newPlaybookCmd(a), newDocCmd(a), newArtifactCmd(a), newSupportCmd())
	return root
}

func builtinRegistry() map[string]step.Builtin {
	reg := make(map[string]step.Builtin)
	for _, b := range builtins.All() {
		reg[b.Spec().Name] = b
	}
	return reg
}
