package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/internal/printers"

	"github.com/mensylisir/kubexm"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/engine/output"
	"github.com/mensylisir/kubexm/lifecycle"
)

// app is what the commands need from the rest of the program: the
// lifecycle of a run, wired to this program's builtins, transports and
// views (newRootCmd fills it).
type app struct{ lifecycle.Runner }

// newApp is the app of r, with this program's version and text view.
func newApp(r lifecycle.Runner) *app {
	r.Version, r.TextSink = version, output.Human
	return &app{r}
}

// playFlags are the options of `kubexm play` and the verbs: the flags bind
// into the run's request.
type playFlags = lifecycle.Request

func newPlayCmd(a *app) *cobra.Command {
	var f playFlags
	cmd := &cobra.Command{
		Use:   "play PLAYBOOK",
		Short: "Run a playbook against the hosts of a cluster.yaml",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var ran lifecycle.Cluster
			f.Loaded = func(c lifecycle.Cluster) error { ran = c; return nil }
			if err := a.play(cmd.Context(), cmd.OutOrStdout(), args[0], f); err != nil {
				return err
			}
			if filepath.Base(strings.TrimSuffix(args[0], "/")) == "create-cluster" && f.Inventory != "" {
				lifecycle.AdminKubeconfigHint(cmd.ErrOrStderr(), f, ran)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.Inventory, "inventory", "i", "", "cluster.yaml describing the hosts")
	addRunFlags(fl, &f, "f")
	fl.BoolVar(&f.ListTasks, "list-tasks", false, "list the tasks that would run, and exit")
	fl.BoolVar(&f.ListHosts, "list-hosts", false, "list the hosts each play would run on, and exit")
	fl.BoolVar(&f.ListTags, "list-tags", false, "list the tags of each play, and exit")
	fl.BoolVar(&f.Syntax, "syntax-check", false, "load and check the playbook, and exit")
	fl.BoolVar(&f.ForceHandlers, "force-handlers", false, "run notified handlers even on hosts that failed afterwards (as the play keyword force_handlers)")
	fl.StringVar(&f.Backup, "backup", "", "the backup archive a restore reads: sets -e backup_file to its absolute path")
	addOfflineBundleFlag(fl, &f)
	return cmd
}

// addRunFlags registers the flags of a playbook run that `kubexm play` and
// the verbs (create cluster, upgrade cluster, ...) share; forksShort is the
// shorthand of --forks ("" for none: the verbs use -f for the cluster file).
func addRunFlags(fl *pflag.FlagSet, f *playFlags, forksShort string) {
	fl.StringSliceVarP(&f.Tags, "tags", "t", nil, "run only tasks with these tags (comma separated)")
	fl.StringSliceVar(&f.SkipTags, "skip-tags", nil, "skip tasks with these tags")
	fl.StringVar(&f.StartAt, "start-at-task", "", "start at the first task with this name (exact or glob)")
	fl.StringVarP(&f.Limit, "limit", "l", "", "further limit hosts to this pattern (e.g. master1,etcd:!etcd3)")
	fl.BoolVarP(&f.Check, "check", "C", false, "dry run: report what would change, change nothing")
	fl.BoolVarP(&f.Diff, "diff", "D", false, "show the differences of changed files")
	fl.StringArrayVarP(&f.ExtraVars, "extra-vars", "e", nil, "set a variable: name=value, @file.yaml or a {...} mapping (repeatable)")
	fl.IntVarP(&f.Forks, "forks", forksShort, 50, "how many hosts work at once")
	fl.StringVar(&f.Resume, "resume", "", "continue a failed run, skipping what succeeded: the last run, or --resume=RUN-ID")
	fl.Lookup("resume").NoOptDefVal = "last"
	fl.StringVarP(&f.Output, "output", "o", "text", "output format: text or json")
	fl.CountVarP(&f.Verbose, "verbose", "v", "show stdout/stderr of every task (-vv: also progress)")
	fl.StringSliceVar(&f.RolesPath, "roles-path", nil, "directories searched for roles before the built-in ones")
	addOverlayFlag(fl, &f.Overlays)
	fl.StringVar(&f.WorkDir, "workdir", "", "work directory holding run journals (default .kubexm/<cluster name>)")
	fl.BoolVar(&f.NoJournal, "no-journal", false, "do not write a run journal (such a run cannot be resumed)")
	fl.DurationVar(&f.LockWait, "lock-wait", 15*time.Second, "how long to wait for another kubexm run's lock on the hosts before giving up")
	fl.BoolVar(&f.BreakLock, "break-lock", false, "end the kubexm run that holds the hosts' lock (one whose control machine is gone) and take it; says whose it was")
}

func addOverlayFlag(fl *pflag.FlagSet, dirs *[]string) {
	fl.StringArrayVar(dirs, "overlay", nil, "a directory whose roles/<role>/templates|files/<file> replace a role's file and whose hooks/<playbook>/ add hook plays; repeatable, a later one wins")
}

func addOfflineBundleFlag(fl *pflag.FlagSet, f *playFlags) {
	fl.StringVar(&f.OfflineBundle, "offline-bundle", "", "install from this bundle of kubexm artifact export: verified, unpacked into the work directory, and no download reaches the network")
}

func (a *app) play(ctx context.Context, w io.Writer, ref string, f playFlags) error {
	f.Playbook, f.Stdout, f.Stderr = ref, w, os.Stderr
	_, err := a.Run(ctx, f)
	return err
}

// newPlaybookCmds are playbook list, export and diff.
func newPlaybookCmds(a *app) []*cobra.Command {
	var output string
	list := &cobra.Command{
		Use:   "list",
		Short: "List the built-in playbooks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := printers.Check(output, "text"); err != nil {
				return err
			}
			entries, err := kubexm.Playbooks(a.BuiltinFS)
			if err != nil {
				return err
			}
			return printers.PrintItems(cmd.OutOrStdout(), output, entries, func(w io.Writer) error { return kubexm.WritePlaybooks(w, entries) })
		},
	}
	addOutputFlag(list, &output, "text")
	var force bool
	export := &cobra.Command{
		Use:   "export DIR",
		Short: "Write the built-in playbooks and roles to DIR for forking",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := kubexm.Export(a.BuiltinFS, args[0], force)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d files to %s\n", n, args[0])
			return nil
		},
	}
	export.Flags().BoolVar(&force, "force", false, "overwrite files that already exist")
	return []*cobra.Command{list, export, newPlaybookDiffCmd(a)}
}

func newPlaybookDiffCmd(a *app) *cobra.Command {
	var overlays []string
	var out string
	cmd := &cobra.Command{
		Use:   "diff DIR",
		Short: "Show how a forked playbook differs from the built-in one it came from",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Exit 1: the fork differs; 2: it could not be compared.
			err := printers.Check(out, "text")
			var d *engine.ForkDiff
			if err == nil {
				d, err = engine.DiffFork(args[0], engine.LoadOptions{BuiltinFS: a.BuiltinFS, Overlays: overlays})
			}
			if err == nil {
				err = printers.Print(cmd.OutOrStdout(), out, d, d.Write)
			}
			if err != nil {
				return &lifecycle.ExitError{Err: err, Code: 2}
			}
			if err := d.Differs(args[0]); err != nil {
				return &lifecycle.ExitError{Err: err, Code: 1}
			}
			return nil
		},
	}
	addOverlayFlag(cmd.Flags(), &overlays)
	cmd.Flags().StringVarP(&out, "output", "o", "text", "output format: text, json or yaml")
	return cmd
}
