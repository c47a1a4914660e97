package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/lifecycle"
)

// The verb-noun commands of seeds/002 (create cluster, delete nodes, ...)
// are front ends over the built-in playbooks: each sets the playbook, the
// cluster file and the variables its flags stand for, and runs it the way
// `kubexm play` does (a.play), so lookup, locks, journals, --resume and the
// output are the same.

// verbFlags are the flags of a verb that runs a playbook.
type verbFlags struct {
	play playFlags
	yes  bool
	// vars turn the verb's own flags into playbook variables (-e), after
	// prepare has checked them.
	vars []func() error
	// loaded, if set, is told the cluster of the run before anything runs
	// (lifecycle.Request.Loaded; with --server, before the job is queued):
	// the confirmation questions. after, if set, is told about a local run
	// that succeeded.
	loaded func(cmd *cobra.Command, c lifecycle.Cluster) error
	after  func(cmd *cobra.Command)
	// failed, if set, is told about a local run that failed and returns
	// the command's error (upgrade --rollback-on-failure).
	failed func(cmd *cobra.Command, err error) error
}

// setVar makes the flag bound to p stand for -e variable: set (not its
// zero value; a count from 1), it sets variable to its value, refusing -e
// variable too.
func setVar[T comparable](v *verbFlags, p *T, flag, variable string) {
	v.vars = append(v.vars, func() error {
		var zero T
		if n, ok := any(*p).(int); *p == zero || (ok && n < 0) {
			return nil
		}
		return v.play.SetVar(flag, variable, *p)
	})
}

// confirmFirst adds --yes, and asks question(c) before a run changes the
// cluster c unless --yes or --check says there is nothing to ask.
func (v *verbFlags) confirmFirst(cmd *cobra.Command, question func(c lifecycle.Cluster) string) {
	cmd.Flags().BoolVarP(&v.yes, "yes", "y", false, "do not ask for confirmation")
	v.loaded = func(cmd *cobra.Command, c lifecycle.Cluster) error {
		if v.yes || v.play.Check {
			return nil
		}
		return lifecycle.Confirm(cmd.InOrStdin(), cmd.ErrOrStderr(), question(c))
	}
}

// addVerbCmds adds the verb-noun commands to root, under the verbs that
// exist already (create, certs) or new ones.
func addVerbCmds(root *cobra.Command, a *app) {
	verb := func(name, short string) *cobra.Command {
		for _, c := range root.Commands() {
			if c.Name() == name {
				return c
			}
		}
		c := &cobra.Command{Use: name, Short: short}
		root.AddCommand(c)
		return c
	}
	verb("create", "").AddCommand(newCreateClusterCmd(a))
	verb("delete", "Delete a cluster or take nodes out of it").AddCommand(newDeleteClusterCmd(a), newDeleteNodesCmd(a))
	verb("add", "Add nodes to a cluster").AddCommand(newAddNodesCmd(a))
	verb("upgrade", "Upgrade a cluster").AddCommand(newUpgradeClusterCmd(a))
	verb("backup", "Back up a cluster, list and download the backups a kubexm server made").AddCommand(newBackupClusterCmd(a), newBackupListCmd(), newBackupDownloadCmd())
	verb("restore", "Restore a cluster from a backup").AddCommand(newRestoreClusterCmd(a))
	verb("rollback", "Roll a cluster back").AddCommand(newRollbackClusterCmd(a))
	verb("certs", "").AddCommand(newCertsRenewCmd(a))
	verb("plan", "Show what a run would change").AddCommand(newPlanClusterCmd(a))
	verb("run", "Run a command on hosts of a cluster").AddCommand(newRunCommandCmd(a))
	get := verb("get", "List clusters and nodes")
	get.AddCommand(newGetClustersCmd(), newGetNodesCmd(a), newGetRunsCmd(), newGetKubeconfigCmd(a))
	// kubectl users' `get pods`: the cluster's objects are kubectl's.
	get.Annotations = map[string]string{unknownHint: "kubexm get shows the clusters kubexm made and their hosts; the objects in a cluster are kubectl's: kubectl --kubeconfig .kubexm/CLUSTER/kubeconfig get ..."}
	verb("describe", "Describe a cluster").AddCommand(newDescribeClusterCmd(a))
	for _, n := range notYetVerbs() {
		verb(n.verb, n.verbShort).AddCommand(newNotYetCmd(n))
	}
}

// verbCmd is a command running playbook on the cluster file of -f with the
// common run flags; prepare, if set, turns the verb's own flags into
// variables and checks them before anything runs.
func verbCmd(a *app, use, playbook, short string, v *verbFlags, prepare func(*cobra.Command, *verbFlags) error) *cobra.Command {
	var remote clientFlags
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if v.play.Inventory, err = clusterFile(v.play.Inventory); err != nil {
				return err
			}
			if prepare != nil {
				if err := prepare(cmd, v); err != nil {
					return err
				}
			}
			for _, set := range v.vars {
				if err := set(); err != nil {
					return err
				}
			}
			if remote.Server != "" {
				if v.loaded != nil {
					c, err := lifecycle.ReadCluster(v.play.Inventory, v.play.WorkDir, v.play.RolesPath)
					if err != nil {
						return err
					}
					if err := v.loaded(cmd, c); err != nil {
						return err
					}
				}
				return playRemote(cmd, playbook, v.play, remote)
			}
			if v.loaded != nil {
				v.play.Loaded = func(c lifecycle.Cluster) error { return v.loaded(cmd, c) }
			}
			err = a.play(cmd.Context(), cmd.OutOrStdout(), playbook, v.play)
			if err == nil && v.after != nil {
				v.after(cmd)
			}
			if err != nil && v.failed != nil {
				return v.failed(cmd, err)
			}
			return err
		},
	}
	fl := cmd.Flags()
	addClusterFileFlag(fl, &v.play.Inventory)
	addRunFlags(fl, &v.play, "")
	addRemoteFlags(fl, &remote)
	fl.BoolVar(&v.play.Check, "dry-run", false, "same as --check")
	return cmd
}

func newCreateClusterCmd(a *app) *cobra.Command {
	v := &verbFlags{}
	var skipPreflight bool
	cmd := verbCmd(a, "cluster", "create-cluster", "Create a cluster from cluster.yaml (the create-cluster playbook)", v, func(*cobra.Command, *verbFlags) error {
		if skipPreflight {
			v.play.SkipTags = append(v.play.SkipTags, "preflight")
		}
		return nil
	})
	var ran lifecycle.Cluster
	v.loaded = func(_ *cobra.Command, c lifecycle.Cluster) error { ran = c; return nil }
	v.after = func(cmd *cobra.Command) { lifecycle.AdminKubeconfigHint(cmd.ErrOrStderr(), v.play, ran) }
	addOfflineBundleFlag(cmd.Flags(), &v.play)
	cmd.Flags().BoolVar(&skipPreflight, "skip-preflight", false, "skip the preflight checks (--skip-tags preflight; for debugging)")
	return cmd
}

func newDeleteClusterCmd(a *app) *cobra.Command {
	v := &verbFlags{}
	var packages bool
	cmd := verbCmd(a, "cluster", "delete", "Delete a cluster: remove what kubexm installed on every host (the delete playbook)", v, nil)
	v.confirmFirst(cmd, func(c lifecycle.Cluster) string {
		return "This deletes " + c.Summary() + ": its data in etcd and every workload are gone."
	})
	cmd.Flags().BoolVar(&packages, "delete-packages", false, "also remove the OS packages kubexm installed (-e delete_packages=true)")
	setVar(v, &packages, "delete-packages", "delete_packages")
	return cmd
}

func newAddNodesCmd(a *app) *cobra.Command {
	v := &verbFlags{}
	var nodes []string
	cmd := verbCmd(a, "nodes", "add-nodes", "Bring the hosts of cluster.yaml the cluster lacks into it (the add-nodes playbook)", v, func(_ *cobra.Command, v *verbFlags) error {
		if len(nodes) == 0 {
			return nil
		}
		if v.play.Limit != "" {
			return errors.New("--nodes and --limit both choose the hosts; give one")
		}
		v.play.Limit = strings.Join(nodes, ",")
		return nil
	})
	addOfflineBundleFlag(cmd.Flags(), &v.play)
	cmd.Flags().StringSliceVar(&nodes, "nodes", nil, "consider only these hosts of cluster.yaml (as --limit)")
	return cmd
}

func newDeleteNodesCmd(a *app) *cobra.Command {
	v := &verbFlags{}
	var nodes []string
	var force bool
	cmd := verbCmd(a, "nodes", "delete-nodes", "Drain nodes and take them out of the cluster (the delete-nodes playbook)", v, func(cmd *cobra.Command, v *verbFlags) error {
		if len(nodes) == 0 {
			return errors.New("--nodes is required: the nodes to take out (never inferred from cluster.yaml)")
		}
		return v.play.SetVar("nodes", "nodes", strings.Join(nodes, ","))
	})
	v.confirmFirst(cmd, func(c lifecycle.Cluster) string {
		q := fmt.Sprintf("This drains %s and removes them from %s.", strings.Join(nodes, ", "), c.Summary())
		if force {
			q += " --force: pods no controller manages are deleted and PodDisruptionBudgets are bypassed."
		}
		return q
	})
	cmd.Flags().StringSliceVar(&nodes, "nodes", nil, "the nodes to take out, by name (required)")
	cmd.Flags().BoolVar(&force, "force", false, "remove even when the drain fails, and remove unreachable nodes without cleaning them (-e force=true)")
	setVar(v, &force, "force", "force")
	return cmd
}

func newUpgradeClusterCmd(a *app) *cobra.Command {
	v := &verbFlags{}
	var to string
	var rollbackOnFailure bool
	var serial int
	cmd := verbCmd(a, "cluster", "upgrade", "Upgrade Kubernetes to spec.kubernetes.version (the upgrade playbook)", v, func(cmd *cobra.Command, v *verbFlags) error {
		if to == "" {
			return errors.New("--to-version is required: the version cluster.yaml's spec.kubernetes.version names")
		}
		if rollbackOnFailure && cmd.Flags().Lookup("server").Value.String() != "" {
			return errors.New("--rollback-on-failure runs locally only: with --server, run kubexm rollback cluster --server ... after a failed upgrade")
		}
		return lifecycle.CheckUpgradeTarget(v.play.Inventory, v.play.RolesPath, to)
	})
	v.failed = func(cmd *cobra.Command, err error) error {
		if !rollbackOnFailure || v.play.Check {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "the upgrade failed (%v): --rollback-on-failure runs the rollback playbook\n", err)
		// Only the upgrade that failed: one whose record says it finished
		// (a failed re-run of it) is not rolled back.
		extra := append(append([]string(nil), v.play.ExtraVars...), "rollback_unfinished_only=true")
		back := lifecycle.Request{Inventory: v.play.Inventory, ExtraVars: extra, Forks: v.play.Forks, Output: v.play.Output,
			Verbose: v.play.Verbose, RolesPath: v.play.RolesPath, Overlays: v.play.Overlays, WorkDir: v.play.WorkDir, LockWait: v.play.LockWait}
		if rerr := a.play(cmd.Context(), cmd.OutOrStdout(), "rollback", back); rerr != nil {
			return fmt.Errorf("the upgrade failed: %w; its rollback failed too: %v", err, rerr)
		}
		return fmt.Errorf("the upgrade failed and was rolled back: %w", err)
	}
	addOfflineBundleFlag(cmd.Flags(), &v.play)
	cmd.Flags().BoolVar(&rollbackOnFailure, "rollback-on-failure", false, "when the upgrade fails, run the rollback playbook (binary mode: back to the version the upgrade kept); not with --server")
	cmd.Flags().StringVar(&to, "to-version", "", "the target version; must be spec.kubernetes.version of the cluster file (required)")
	cmd.Flags().IntVar(&serial, "node-concurrency", 0, "workers upgraded at once (-e upgrade_serial; default 1)")
	setVar(v, &serial, "node-concurrency", "upgrade_serial")
	return cmd
}

func newRollbackClusterCmd(a *app) *cobra.Command {
	return verbCmd(a, "cluster", "rollback", "Put a cluster whose upgrade failed back to the version it ran (the rollback playbook)", &verbFlags{}, nil)
}

func newBackupClusterCmd(a *app) *cobra.Command {
	v := &verbFlags{}
	var keyFile string
	var keep int
	cmd := verbCmd(a, "cluster", "backup", "Back up etcd, the PKI and the configuration of a cluster (the backup playbook)", v, nil)
	cmd.Flags().StringVar(&keyFile, "key-file", "", "encrypt the archive with the passphrase in this file (-e backup_key_file)")
	cmd.Flags().IntVar(&keep, "keep", 0, "keep only the newest N archives of this cluster (-e backup_keep)")
	setVar(v, &keyFile, "key-file", "backup_key_file")
	setVar(v, &keep, "keep", "backup_keep")
	return cmd
}

func newRestoreClusterCmd(a *app) *cobra.Command {
	v := &verbFlags{}
	cmd := verbCmd(a, "cluster", "restore", "Put a cluster back to a backup (the restore playbook)", v, func(cmd *cobra.Command, v *verbFlags) error {
		if v.play.Backup == "" {
			return errors.New("--backup is required: the archive of backup cluster to restore")
		}
		return nil
	})
	v.confirmFirst(cmd, func(c lifecycle.Cluster) string {
		return fmt.Sprintf("This puts %s back to %s: what was written since is lost.", c.Summary(), v.play.Backup)
	})
	cmd.Flags().StringVar(&v.play.Backup, "backup", "", "the archive to restore (required); with --server the name of a backup the server made (kubexm backup list --server URL --cluster NAME)")
	return cmd
}

func newCertsRenewCmd(a *app) *cobra.Command {
	cmd := verbCmd(a, "renew [all|ca]", "certs-renew", "Reissue every leaf certificate from the existing CAs (the certs-renew playbook)", &verbFlags{}, nil)
	cmd.Args = func(_ *cobra.Command, args []string) error {
		if len(args) == 0 || (len(args) == 1 && args[0] == "all") {
			return nil
		}
		return &notYetError{what: "kubexm certs renew " + strings.Join(args, " "), why: "renewing one certificate alone is not written yet", hint: "kubexm certs renew -f cluster.yaml renews every leaf (all); kubexm certs renew ca replaces the CAs"}
	}
	v := &verbFlags{}
	ca := verbCmd(a, "ca", "rotate-ca", "Replace the cluster, front-proxy and etcd CAs with new ones (the rotate-ca playbook)", v, nil)
	v.confirmFirst(ca, func(c lifecycle.Cluster) string {
		return fmt.Sprintf("This replaces the CAs of %s: every certificate is reissued and every component restarts.", c.Summary())
	})
	cmd.AddCommand(ca)
	return cmd
}

// notYet is a verb whose playbook does not exist yet.
type notYet struct {
	verb, verbShort, noun, why, hint string
}

// notYetVerbs are the commands users of kubectl and kk look for that
// kubexm has no playbook behind yet: each refuses with exit 3 and says
// what to do meanwhile.
func notYetVerbs() []notYet {
	const noContexts = "kubexm has no contexts: every command names its cluster file with -f (default ./cluster.yaml)"
	return []notYet{
		{verb: "run", noun: "task", why: "no playbook runs one task alone yet",
			hint: "kubexm create cluster -f cluster.yaml --start-at-task NAME (or --tags TAG) re-runs from that task; finished tasks change nothing"},
		{verb: "upgrade", noun: "self", why: "kubexm does not replace its own binary yet",
			hint: "install the new release's binary in place of this one"},
		{verb: "cordon", verbShort: "Mark nodes unschedulable", noun: "node", why: "no cordon playbook exists yet",
			hint: "kubexm run command -f cluster.yaml --group master[0] --become -- kubectl --kubeconfig /etc/kubernetes/admin.kubeconfig cordon NODE"},
		{verb: "uncordon", verbShort: "Mark nodes schedulable", noun: "node", why: "no uncordon playbook exists yet",
			hint: "kubexm run command -f cluster.yaml --group master[0] --become -- kubectl --kubeconfig /etc/kubernetes/admin.kubeconfig uncordon NODE"},
		{verb: "restart", verbShort: "Restart cluster components", noun: "component", why: "no playbook restarts a component host by host with health checks yet",
			hint: "kubexm run command -f cluster.yaml --nodes HOST --become -- systemctl restart UNIT (one host at a time)"},
		{verb: "rotate", verbShort: "Rotate cluster secrets", noun: "tokens", why: "no playbook rotates the service-account keys yet",
			hint: "kubexm certs renew -f cluster.yaml renews the certificates; the service-account key pair stays"},
		{verb: "install", verbShort: "Install add-ons", noun: "addon", why: "no playbook installs one add-on on its own yet; spec.addons (metrics-server, manifests and Helm charts of your own) is installed by create cluster",
			hint: "list it in spec.addons (a name, or sources.yaml / sources.chart) and run kubexm play create-cluster -i cluster.yaml --tags user-addons (yours) or --tags addons"},
		{verb: "restart", noun: "cluster", why: "no playbook restarts a whole cluster host by host with health checks yet",
			hint: "kubexm run command -f cluster.yaml --nodes HOST --become -- systemctl restart kubelet (one host at a time)"},
		{verb: "config", noun: "get-contexts", why: noContexts,
			hint: "kubexm get clusters lists the clusters kubexm keeps on this machine; kubectl --kubeconfig .kubexm/CLUSTER/kubeconfig reaches one"},
		{verb: "config", noun: "use-context", why: noContexts,
			hint: "pass -f cluster.yaml to each command, or run it in the directory holding cluster.yaml"},
	}
}

// notYetError is a verb that exists in the command tree but has no
// playbook behind it yet: it never succeeds silently.
type notYetError struct{ what, why, hint string }

func (e *notYetError) Error() string {
	return fmt.Sprintf("%s is not available yet: %s; meanwhile: %s", e.what, e.why, e.hint)
}

// ExitCode is 3, so that a script can tell "not written yet" from a run
// that failed (2) or hosts that were unreachable (4).
func (e *notYetError) ExitCode() int { return 3 }

func newNotYetCmd(n notYet) *cobra.Command {
	what := "kubexm " + n.verb + " " + n.noun
	return &cobra.Command{
		Use:   n.noun,
		Short: "Not available yet: " + n.why,
		// Whatever flags a user tries, the answer is the same message.
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return &notYetError{what: what, why: n.why, hint: n.hint}
		},
	}
}
