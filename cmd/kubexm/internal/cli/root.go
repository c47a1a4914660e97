// Package cli is kubexm's command tree: the commands, their flags and what
// they print. The work sits in the packages they call (lifecycle, service,
// clusterview, ...); cmd/kubexm only starts it, as kubectl's main does.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mensylisir/kubexm/schema/matrix"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm"
	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/engine/transport/ssh"
	"github.com/mensylisir/kubexm/internal/cmdtree"
	"github.com/mensylisir/kubexm/internal/interrupt"
	"github.com/mensylisir/kubexm/internal/profile"
	"github.com/mensylisir/kubexm/lifecycle"
	"github.com/mensylisir/kubexm/service/confine"
)

// version is the engine version playbooks declare in `requires:`; release
// builds set it with -ldflags "-X github.com/mensylisir/kubexm/cmd/kubexm/internal/cli.version=...".
var version = "0.1.0"

// stopGrace bounds how long kubexm takes to stop after SIGINT or SIGTERM:
// the commands on the hosts get transport.KillGrace to end, a stalled
// connection is given up on, and the recap is printed.
const stopGrace = 10 * time.Second

// Main runs kubexm with the process's arguments and exits with the status
// its error asks for.
func Main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go interrupt.Watch(sigs, cancel, stopGrace, os.Stderr, os.Exit)
	root, conn := newRoot()
	stopProfile := profile.StartCPU(os.Getenv("KUBEXM_CPUPROFILE"), os.Stderr)
	err := root.ExecuteContext(ctx)
	stopProfile()
	// An interrupted command keeps nothing: its user is stopping, not
	// about to run again.
	if ctx.Err() == nil {
		if herr := conn.HandOver(); herr != nil {
			fmt.Fprintln(os.Stderr, "Warning: the connections are not kept:", herr)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		var coded interface{ ExitCode() int }
		if errors.As(err, &coded) {
			os.Exit(coded.ExitCode())
		}
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root, _ := newRoot()
	return root
}

// newRoot is the command tree and the connector its commands share, whose
// connections Main hands over to a keeper after the command (--ssh-persist).
func newRoot() (*cobra.Command, *lifecycle.Connector) {
	root := &cobra.Command{
		Use:           "kubexm",
		Short:         "Create and run Kubernetes clusters from one cluster.yaml",
		Version:       version,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	// --version also says what this kubexm installs; `kubexm support` has
	// the whole matrix.
	if s, err := matrix.BuiltinSupport(); err == nil {
		root.SetVersionTemplate("{{.Name}} version {{.Version}}\ninstalls Kubernetes " + s.KubernetesRange() + "; `kubexm support` lists every choice\n")
	}
	conn := &lifecycle.Connector{}
	var policy string
	pf := root.PersistentFlags()
	pf.StringVar(&policy, "ssh-host-key-checking", string(ssh.AcceptNew),
		"strict (only hosts in known_hosts), accept-new (record new hosts in ~/.kubexm/known_hosts, or $KUBEXM_HOME/known_hosts) or off; a changed key is always refused")
	pf.IntVar(&conn.UploadForks, "upload-forks", 10, "how many file transfers run at once across all hosts")
	var connEventsFD int
	pf.IntVar(&connEventsFD, "conn-events-fd", 0, "write a JSON line for each SSH connection dialed, failed or closed to this file descriptor (for kubexm worker)")
	_ = pf.MarkHidden("conn-events-fd")
	var confineDial []string
	pf.StringSliceVar(&confineDial, "confine-dial", nil, "resolve each host's name once, refuse loopback, link-local and this machine's addresses but these networks, and connect to the checked address (for kubexm worker's jobs)")
	_ = pf.MarkHidden("confine-dial")
	var persist time.Duration
	pf.DurationVar(&persist, "ssh-persist", 0, "keep the SSH connections open this long after the command, unused, for the next one (as OpenSSH's ControlPersist; e.g. 60s); they are served on sockets only you can open, in ~/.kubexm/ssh or $KUBEXM_HOME/ssh")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		p, err := ssh.ParseHostKeyChecking(policy)
		conn.Policy = p
		if err == nil && cmd.Flags().Changed("ssh-persist") {
			err = persistFor(cmd, conn, persist)
		}
		if err == nil && connEventsFD > 2 {
			err = conn.ReportConns(connEventsFD)
		}
		if err == nil && cmd.Flags().Changed("confine-dial") {
			var g *confine.Guard
			if g, err = confine.New(confine.Config{Allow: confineDial}); err == nil {
				conn.Dial = g.Dial
			}
		}
		return err
	}
	a := newApp(lifecycle.Runner{
		LoadInventory: lifecycle.LoadInventory,
		Builtins:      builtins.ByName(),
		Connect:       conn.Connect,
		BuiltinFS:     kubexm.Content(),
	})
	root.AddCommand(newPlayCmd(a), newSupportCmd(), newVersionCmd(), newExplainCmd(), newSSHKeeperCmd())
	root.AddCommand(newServerCmd(a), newWorkerCmd(a), newLogsCmd(), newControllerCmd(a))
	addGroupCmds(root, a)
	cmdtree.AddNounAliases(root, [][2]string{{"node", "nodes"}, {"cluster", "clusters"}, {"token", "tokens"}, {"component", "components"}, {"addon", "addons"}, {"task", "tasks"}})
	cmdtree.RefuseUnknownSubcommands(root)
	cmdtree.SetHelp(root, helpFiles, "help")
	return root, conn
}

// connectsToNoHost says the top-level command name reaches no host over SSH.
func connectsToNoHost(name string) bool {
	switch name {
	case "artifact", "bundle", "completion", "config", "doc", "explain", "help", "logs", "playbook", "support", "version", "ssh-keeper":
		return true
	}
	return false
}

// persistFor sets up --ssh-persist for cmd. The service's jobs and the
// controller never keep a connection past a run: a keeper serves whoever
// runs as the same user on the server machine.
func persistFor(cmd *cobra.Command, conn *lifecycle.Connector, idle time.Duration) error {
	if idle == 0 {
		return nil
	}
	top := cmd
	for top.HasParent() && top.Parent().HasParent() {
		top = top.Parent()
	}
	switch {
	case connectsToNoHost(top.Name()):
		return fmt.Errorf("--ssh-persist: kubexm %s connects to no host, so it has no connection to keep", top.Name())
	case cmd.Flags().Changed("confine-dial"):
		return errors.New("--ssh-persist: kubexm worker's jobs do not keep connections between runs")
	case top.Name() == "server" || top.Name() == "worker" || top.Name() == "controller":
		return fmt.Errorf("--ssh-persist: kubexm %s does not keep connections between runs; give it to `kubexm play` and the cluster commands", top.Name())
	}
	if fl := cmd.Flags().Lookup("server"); fl != nil && fl.Value.String() != "" {
		return errors.New("--ssh-persist keeps this machine's connections, and with --server (or $KUBEXM_SERVER) the server's jobs connect; run without --server to use it")
	}
	dir, err := lifecycle.PersistDir()
	if err != nil {
		return err
	}
	conn.Persist, err = ssh.NewPersist(dir, idle)
	return err
}

// newSSHKeeperCmd is the keeper --ssh-persist starts: it reads the
// connections to keep on its standard input.
func newSSHKeeperCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "ssh-keeper",
		Short:  "Keep SSH connections open for the next kubexm run (started by --ssh-persist)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return ssh.ServeKeeper(cmd.Context(), cmd.InOrStdin(), cmd.ErrOrStderr())
		},
	}
}
