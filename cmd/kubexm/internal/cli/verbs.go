package cli

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mensylisir/kubexm/internal/cmdtree"
	"github.com/mensylisir/kubexm/lifecycle"
)

// The verb-noun commands of seeds/002 (create cluster, delete nodes, ...)
// are front ends over the built-in playbooks: each sets the playbook, the
// cluster file and the variables its flags stand for, and runs it the way
// `kubexm play` does (a.play), so lookup, locks, journals, --resume and the
// output are the same. They are rows of playbookVerbs, which verbCmd turns
// into commands: a new verb is a row, not a function.

// verb is a command running a playbook on the cluster file of -f with the
// common run flags, --server and --dry-run.
type verb struct {
	path     string // its words after kubexm: "delete nodes"
	use      string // its use line, when not the path's last word
	playbook string
	short    string
	bundle   bool // takes --offline-bundle
	flags    []verbFlag
	args     cobra.PositionalArgs // default: no arguments
	// prepare, if set, checks the flags and sets the fields of the run's
	// request they stand for, before anything runs.
	prepare func(cmd *cobra.Command, r *playFlags) error
	// confirm, if set, adds --yes and is the question asked before a run
	// changes the cluster c, unless --yes or --check says there is nothing
	// to ask (lifecycle.Request.Loaded; with --server, before the job is
	// queued).
	confirm func(fl *pflag.FlagSet, c lifecycle.Cluster) string
	// after, if set, is told about a local run that succeeded; failed
	// about one that failed, and returns the command's error.
	after  func(cmd *cobra.Command, r playFlags, c lifecycle.Cluster)
	failed func(cmd *cobra.Command, a *app, r playFlags, err error) error
}

// verbFlag is a flag of a verb's own.
type verbFlag struct {
	cmdtree.Flag
	// variable is the playbook variable (-e) the flag stands for: set (not
	// its zero value; a count from 1), it sets variable to its value (a
	// list joined by commas), refusing -e variable too.
	variable string
	required string // the error when the flag is not given, if it must be
}

// flag is a verb's flag of name, type and default value, and usage.
func flag(name string, value any, usage string) cmdtree.Flag {
	return cmdtree.Flag{Name: name, Value: value, Usage: usage}
}

// playbookVerbs are the verbs that run a lifecycle playbook.
func playbookVerbs() []verb {
	return []verb{
		{path: "create cluster", playbook: "create-cluster", short: "Create a cluster from cluster.yaml (the create-cluster playbook)", bundle: true,
			flags:   []verbFlag{{Flag: flag("skip-preflight", false, "skip the preflight checks (--skip-tags preflight; for debugging)")}},
			prepare: skipPreflight,
			after: func(cmd *cobra.Command, r playFlags, c lifecycle.Cluster) {
				lifecycle.AdminKubeconfigHint(cmd.ErrOrStderr(), r, c)
			}},
		{path: "delete cluster", playbook: "delete", short: "Delete a cluster: remove what kubexm installed on every host (the delete playbook)",
			flags: []verbFlag{{Flag: flag("delete-packages", false, "also remove the OS packages kubexm installed (-e delete_packages=true)"), variable: "delete_packages"}},
			confirm: func(_ *pflag.FlagSet, c lifecycle.Cluster) string {
				return "This deletes " + c.Summary() + ": its data in etcd and every workload are gone."
			}},
		{path: "add nodes", playbook: "add-nodes", short: "Bring the hosts of cluster.yaml the cluster lacks into it (the add-nodes playbook)", bundle: true,
			flags:   []verbFlag{{Flag: flag("nodes", []string(nil), "consider only these hosts of cluster.yaml (as --limit)")}},
			prepare: nodesAsLimit},
		{path: "delete nodes", playbook: "delete-nodes", short: "Drain nodes and take them out of the cluster (the delete-nodes playbook)",
			flags: []verbFlag{
				{Flag: flag("nodes", []string(nil), "the nodes to take out, by name (required)"), variable: "nodes",
					required: "--nodes is required: the nodes to take out (never inferred from cluster.yaml)"},
				{Flag: flag("force", false, "remove even when the drain fails, and remove unreachable nodes without cleaning them (-e force=true)"), variable: "force"},
			},
			confirm: func(fl *pflag.FlagSet, c lifecycle.Cluster) string {
				nodes, _ := fl.GetStringSlice("nodes")
				q := fmt.Sprintf("This drains %s and removes them from %s.", strings.Join(nodes, ", "), c.Summary())
				if force, _ := fl.GetBool("force"); force {
					q += " --force: pods no controller manages are deleted and PodDisruptionBudgets are bypassed."
				}
				return q
			}},
		{path: "upgrade cluster", playbook: "upgrade", short: "Upgrade Kubernetes to spec.kubernetes.version (the upgrade playbook)", bundle: true,
			flags: []verbFlag{
				{Flag: flag("rollback-on-failure", false, "when the upgrade fails, run the rollback playbook (binary mode: back to the version the upgrade kept); not with --server")},
				{Flag: flag("to-version", "", "the target version; must be spec.kubernetes.version of the cluster file (required)"),
					required: "--to-version is required: the version cluster.yaml's spec.kubernetes.version names"},
				{Flag: flag("node-concurrency", 0, "workers upgraded at once (-e upgrade_serial; default 1)"), variable: "upgrade_serial"},
			},
			prepare: checkUpgrade, failed: rollBackOnFailure},
		{path: "rollback cluster", playbook: "rollback", short: "Put a cluster whose upgrade failed back to the version it ran (the rollback playbook)"},
		{path: "backup cluster", playbook: "backup", short: "Back up etcd, the PKI and the configuration of a cluster (the backup playbook)",
			flags: []verbFlag{
				{Flag: flag("key-file", "", "encrypt the archive with the passphrase in this file (-e backup_key_file)"), variable: "backup_key_file"},
				{Flag: flag("keep", 0, "keep only the newest N archives of this cluster (-e backup_keep)"), variable: "backup_keep"},
			}},
		{path: "restore cluster", playbook: "restore", short: "Put a cluster back to a backup (the restore playbook)",
			flags: []verbFlag{{Flag: flag("backup", "", "the archive to restore (required); with --server the name of a backup the server made (kubexm backup list --server URL --cluster NAME)"),
				required: "--backup is required: the archive of backup cluster to restore"}},
			prepare: func(cmd *cobra.Command, r *playFlags) error {
				r.Backup, _ = cmd.Flags().GetString("backup")
				return nil
			},
			confirm: func(fl *pflag.FlagSet, c lifecycle.Cluster) string {
				backup, _ := fl.GetString("backup")
				return fmt.Sprintf("This puts %s back to %s: what was written since is lost.", c.Summary(), backup)
			}},
		{path: "certs renew", use: "renew [all|ca]", playbook: "certs-renew", short: "Reissue every leaf certificate from the existing CAs (the certs-renew playbook)",
			args: renewAll},
		{path: "certs renew ca", playbook: "rotate-ca", short: "Replace the cluster, front-proxy and etcd CAs with new ones (the rotate-ca playbook)",
			confirm: func(_ *pflag.FlagSet, c lifecycle.Cluster) string {
				return fmt.Sprintf("This replaces the CAs of %s: every certificate is reissued and every component restarts.", c.Summary())
			}},
	}
}

// skipPreflight is create cluster's --skip-preflight: --skip-tags preflight.
func skipPreflight(cmd *cobra.Command, r *playFlags) error {
	if skip, _ := cmd.Flags().GetBool("skip-preflight"); skip {
		r.SkipTags = append(r.SkipTags, "preflight")
	}
	return nil
}

// nodesAsLimit is add nodes' --nodes: --limit by another name.
func nodesAsLimit(cmd *cobra.Command, r *playFlags) error {
	nodes, _ := cmd.Flags().GetStringSlice("nodes")
	if len(nodes) == 0 {
		return nil
	}
	if r.Limit != "" {
		return errors.New("--nodes and --limit both choose the hosts; give one")
	}
	r.Limit = strings.Join(nodes, ",")
	return nil
}

// checkUpgrade refuses an upgrade to another version than the cluster
// file's, and --rollback-on-failure with --server.
func checkUpgrade(cmd *cobra.Command, r *playFlags) error {
	fl := cmd.Flags()
	if back, _ := fl.GetBool("rollback-on-failure"); back && fl.Lookup("server").Value.String() != "" {
		return errors.New("--rollback-on-failure runs locally only: with --server, run kubexm rollback cluster --server ... after a failed upgrade")
	}
	to, _ := fl.GetString("to-version")
	return lifecycle.CheckUpgradeTarget(r.Inventory, r.RolesPath, to)
}

// rollBackOnFailure is upgrade's --rollback-on-failure.
func rollBackOnFailure(cmd *cobra.Command, a *app, r playFlags, err error) error {
	if back, _ := cmd.Flags().GetBool("rollback-on-failure"); !back || r.Check {
		return err
	}
	r.Stdout, r.Stderr = cmd.OutOrStdout(), os.Stderr
	return a.Runner.RollBackFailedUpgrade(cmd.Context(), r, err, cmd.ErrOrStderr())
}

// renewAll takes certs renew's one argument, all; renewing one
// certificate is not written yet.
func renewAll(_ *cobra.Command, args []string) error {
	if len(args) == 0 || (len(args) == 1 && args[0] == "all") {
		return nil
	}
	return &cmdtree.NotYetError{What: "kubexm certs renew " + strings.Join(args, " "), Why: "renewing one certificate alone is not written yet", Hint: "kubexm certs renew -f cluster.yaml renews every leaf (all); kubexm certs renew ca replaces the CAs"}
}

// addGroupCmds adds the commands under a group (the verb-noun ones, the
// nouns' verbs: config validate, playbook list, ...) to root, making the
// groups with their short help.
func addGroupCmds(root *cobra.Command, a *app) {
	shorts := map[string]string{
		"config": "Validate, view and convert cluster.yaml", "create": "Create a cluster (create cluster) or a sample cluster file (create config)",
		"playbook": "List or export the built-in playbooks and roles", "doc": "Print generated reference documentation",
		"artifact": "Offline bundles: every binary and image a cluster needs, in one file", "images": "The images of an offline bundle in a private registry",
		"certs": "Certificates of a cluster: check their expiry, renew them", "bundle": "List and delete the offline bundles uploaded to a kubexm server",
		"delete": "Delete a cluster or take nodes out of it", "add": "Add nodes to a cluster", "upgrade": "Upgrade a cluster",
		"backup": "Back up a cluster, list and download the backups a kubexm server made", "restore": "Restore a cluster from a backup",
		"rollback": "Roll a cluster back", "plan": "Show what a run would change", "run": "Run a command on hosts of a cluster",
		"get": "Show clusters, nodes, and the jobs of a kubexm server", "describe": "Describe a cluster", "cordon": "Mark nodes unschedulable",
		"uncordon": "Mark nodes schedulable", "restart": "Restart cluster components", "rotate": "Rotate cluster secrets", "install": "Install add-ons",
	}
	parent := func(path string) *cobra.Command { return cmdtree.Parent(root, path, shorts) }
	for _, v := range playbookVerbs() {
		parent(v.path).AddCommand(verbCmd(a, v))
	}
	parent("config validate").AddCommand(newConfigValidateCmd(), newConfigViewCmd(), newConfigConvertCmd())
	parent("create config").AddCommand(newCreateConfigCmd())
	parent("playbook list").AddCommand(newPlaybookCmds(a)...)
	parent("doc builtins").AddCommand(newDocBuiltinsCmd(a))
	export, push := newArtifactCmds(a)
	parent("artifact export").AddCommand(export)
	parent("artifact images push").AddCommand(push)
	parent("certs check").AddCommand(newCertsCheckCmd(a))
	parent("bundle list").AddCommand(newBundleCmds()...)
	parent("backup list").AddCommand(newBackupListCmd(), newBackupDownloadCmd())
	parent("plan cluster").AddCommand(newPlanClusterCmd(a))
	parent("run command").AddCommand(newRunCommandCmd(a))
	get := parent("get clusters")
	get.AddCommand(newGetClustersCmd(), newGetNodesCmd(a), newGetRunsCmd(), newGetKubeconfigCmd(a))
	get.AddCommand(newGetJobsCmds()...)
	// kubectl users' `get pods`: the cluster's objects are kubectl's.
	get.Annotations = map[string]string{cmdtree.UnknownHint: "kubexm get shows the clusters kubexm made and their hosts; the objects in a cluster are kubectl's: kubectl --kubeconfig .kubexm/CLUSTER/kubeconfig get ..."}
	parent("describe cluster").AddCommand(newDescribeClusterCmd(a))
	for _, n := range notYetVerbs() {
		what := "kubexm " + n.verb + " " + n.noun
		parent(n.verb + " " + n.noun).AddCommand(cmdtree.NotYet(n.noun, cmdtree.NotYetError{What: what, Why: n.why, Hint: n.hint}))
	}
}

// verbCmd is the command of v.
func verbCmd(a *app, v verb) *cobra.Command {
	var f playFlags
	var remote clientFlags
	var yes bool
	words := strings.Fields(v.path)
	cmd := &cobra.Command{Use: cmp.Or(v.use, words[len(words)-1]), Short: v.short, Args: v.args}
	if v.args == nil {
		cmd.Args = cobra.NoArgs
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return v.run(cmd, a, f, remote, yes) }
	fl := cmd.Flags()
	addClusterFileFlag(fl, &f.Inventory)
	addRunFlags(fl, &f, "")
	addRemoteFlags(fl, &remote)
	fl.BoolVar(&f.Check, "dry-run", false, "same as --check")
	if v.bundle {
		addOfflineBundleFlag(fl, &f)
	}
	if v.confirm != nil {
		fl.BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	}
	for _, vf := range v.flags {
		vf.Add(fl)
	}
	return cmd
}

// run runs v with the request of its flags r (on the server of remote if
// set); yes is --yes.
func (v verb) run(cmd *cobra.Command, a *app, r playFlags, remote clientFlags, yes bool) error {
	fl := cmd.Flags()
	var err error
	if r.Inventory, err = clusterFile(r.Inventory); err != nil {
		return err
	}
	for _, vf := range v.flags {
		if _, ok := vf.Given(fl); vf.required != "" && !ok {
			return errors.New(vf.required)
		}
	}
	if v.prepare != nil {
		if err := v.prepare(cmd, &r); err != nil {
			return err
		}
	}
	for _, vf := range v.flags {
		if value, ok := vf.Given(fl); vf.variable != "" && ok {
			if err := r.SetVar(vf.Name, vf.variable, value); err != nil {
				return err
			}
		}
	}
	var ran lifecycle.Cluster
	loaded := func(c lifecycle.Cluster) error {
		ran = c
		if v.confirm == nil || yes || r.Check {
			return nil
		}
		return lifecycle.Confirm(cmd.InOrStdin(), cmd.ErrOrStderr(), v.confirm(fl, c))
	}
	// A verb told of the cluster reads it before the job is queued too.
	told := v.confirm != nil || v.after != nil
	if remote.Server != "" {
		if told {
			c, err := lifecycle.ReadCluster(r.Inventory, r.WorkDir, r.RolesPath)
			if err != nil {
				return err
			}
			if err := loaded(c); err != nil {
				return err
			}
		}
		return a.playOn(cmd, v.playbook, r, remote)
	}
	if told {
		r.Loaded = loaded
	}
	err = a.play(cmd.Context(), cmd.OutOrStdout(), v.playbook, r)
	if err == nil && v.after != nil {
		v.after(cmd, r, ran)
	}
	if err != nil && v.failed != nil {
		return v.failed(cmd, a, r, err)
	}
	return err
}

// notYet is a verb whose playbook does not exist yet.
type notYet struct {
	verb, noun, why, hint string
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
		{verb: "cordon", noun: "node", why: "no cordon playbook exists yet",
			hint: "kubexm run command -f cluster.yaml --group master[0] --become -- kubectl --kubeconfig /etc/kubernetes/admin.kubeconfig cordon NODE"},
		{verb: "uncordon", noun: "node", why: "no uncordon playbook exists yet",
			hint: "kubexm run command -f cluster.yaml --group master[0] --become -- kubectl --kubeconfig /etc/kubernetes/admin.kubeconfig uncordon NODE"},
		{verb: "restart", noun: "component", why: "no playbook restarts a component host by host with health checks yet",
			hint: "kubexm run command -f cluster.yaml --nodes HOST --become -- systemctl restart UNIT (one host at a time)"},
		{verb: "rotate", noun: "tokens", why: "no playbook rotates the service-account keys yet",
			hint: "kubexm certs renew -f cluster.yaml renews the certificates; the service-account key pair stays"},
		{verb: "install", noun: "addon", why: "no playbook installs one add-on on its own yet; spec.addons (metrics-server, manifests and Helm charts of your own) is installed by create cluster",
			hint: "list it in spec.addons (a name, or sources.yaml / sources.chart) and run kubexm play create-cluster -i cluster.yaml --tags user-addons (yours) or --tags addons"},
		{verb: "restart", noun: "cluster", why: "no playbook restarts a whole cluster host by host with health checks yet",
			hint: "kubexm run command -f cluster.yaml --nodes HOST --become -- systemctl restart kubelet (one host at a time)"},
		{verb: "config", noun: "get-contexts", why: noContexts,
			hint: "kubexm get clusters lists the clusters kubexm keeps on this machine; kubectl --kubeconfig .kubexm/CLUSTER/kubeconfig reaches one"},
		{verb: "config", noun: "use-context", why: noContexts,
			hint: "pass -f cluster.yaml to each command, or run it in the directory holding cluster.yaml"},
	}
}
