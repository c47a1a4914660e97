package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mensylisir/kubexm/internal/printers"
	"github.com/mensylisir/kubexm/lifecycle"
	"github.com/mensylisir/kubexm/service/client"
)

// A verb given --server URL runs on a kubexm server instead of this
// machine: the cluster file is registered there (a new config version),
// the offline bundle uploaded unless the server has it, the playbook
// queued as a job with the verb's options, and the job's events followed
// here and shown as a local run shows them. The server's own nouns (jobs,
// backups, bundles) are read with the same client.

// clientFlags reach a kubexm server; output is -o.
type clientFlags struct {
	client.Options
	output string
}

// addClientFlags are the flags of a command about the server itself (get
// jobs, backup list, ...): it reads $KUBEXM_SERVER.
func addClientFlags(cmd *cobra.Command, f *clientFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.Server, "server", os.Getenv("KUBEXM_SERVER"), "URL of kubexm server (default $KUBEXM_SERVER)")
	fl.StringVar(&f.Token, "token", "", "API token (default $KUBEXM_TOKEN)")
	fl.StringVar(&f.CA, "ca", "", "CA certificate to trust the server with (its self-signed DATA-DIR/tls/cert.pem)")
	fl.BoolVar(&f.Insecure, "insecure-skip-tls-verify", false, "do not check the server's certificate")
	fl.StringVarP(&f.output, "output", "o", "text", "output format: text, json or yaml")
}

// addRemoteFlags adds --server and how to reach it to a verb. Unlike
// kubexm get jobs, a verb does not read $KUBEXM_SERVER: a variable left in
// a shell must not move a create or a delete to another machine.
func addRemoteFlags(fl *pflag.FlagSet, f *clientFlags) {
	addServerFlags(fl, f, "run on this kubexm server (URL) as a job instead of on this machine, and follow its events here (docs/server.md)", "an operator's")
}

// addServerFlags adds --server, --token, --ca and
// --insecure-skip-tls-verify; serverHelp says what --server does to the
// verb, tokenRole which token it needs.
func addServerFlags(fl *pflag.FlagSet, f *clientFlags, serverHelp, tokenRole string) {
	fl.StringVar(&f.Server, "server", "", serverHelp)
	fl.StringVar(&f.Token, "token", "", "API token for --server: "+tokenRole+" (default $KUBEXM_TOKEN)")
	fl.StringVar(&f.CA, "ca", "", "CA certificate to trust --server with (its self-signed DATA-DIR/tls/cert.pem)")
	fl.BoolVar(&f.Insecure, "insecure-skip-tls-verify", false, "do not check --server's certificate")
}

// newAPIClient is the client of the server f names, for output f.output.
func newAPIClient(f *clientFlags) (*client.Client, error) {
	if err := printers.Check(f.output, "text"); err != nil {
		return nil, err
	}
	return client.New(f.Options)
}

// refuseLocalFlags refuses the flags of names that were given: with
// --server they would name this machine's files or tune a run here.
func refuseLocalFlags(cmd *cobra.Command, names ...string) error {
	for _, name := range names {
		if fl := cmd.Flags().Lookup(name); fl != nil && fl.Changed {
			return fmt.Errorf("--%s does not go to a kubexm server (it names this machine's files or tunes a run here); run without --server to use it", name)
		}
	}
	return nil
}

// executor is where a command runs what it runs: here or, given --server
// (cf), on that kubexm server as jobs, whose events are shown as a run's
// here are; output is the command's -o.
func (a *app) executor(cmd *cobra.Command, cf clientFlags, output string) (lifecycle.Executor, error) {
	if cf.Server == "" {
		return lifecycle.Local{Runner: a.Runner}, nil
	}
	if err := printers.Check(output, "text"); err != nil {
		return nil, err
	}
	changed := func(name string) bool {
		fl := cmd.Flags().Lookup(name)
		return fl != nil && fl.Changed
	}
	return client.Jobs{Options: cf.Options, Runner: a.Runner, Changed: changed, Errw: cmd.ErrOrStderr()}, nil
}

// playOn runs playbook with f here or, given --server (cf), on that kubexm
// server as a job, shown as a run here is (f.Sink, -o json or the text).
func (a *app) playOn(cmd *cobra.Command, playbook string, f playFlags, cf clientFlags) error {
	x, err := a.executor(cmd, cf, f.Output)
	if err != nil {
		return err
	}
	f.Playbook, f.Stdout, f.Stderr = playbook, cmd.OutOrStdout(), os.Stderr
	return x.Play(cmd.Context(), f)
}

// newGetJobsCmds are `kubexm get jobs` and `get job ID`: a server's jobs.
func newGetJobsCmds() []*cobra.Command {
	var f, jf clientFlags
	var cluster, status string
	jobs := &cobra.Command{
		Use:   "jobs",
		Short: "List the jobs of a kubexm server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newAPIClient(&f)
			if err != nil {
				return err
			}
			jobs, err := c.Jobs(cmd.Context(), cluster, status)
			if err != nil {
				return err
			}
			return printers.Print(cmd.OutOrStdout(), f.output, jobs, func(w io.Writer) error { return client.WriteJobs(w, jobs) })
		},
	}
	addClientFlags(jobs, &f)
	jobs.Flags().StringVar(&cluster, "cluster", "", "only this cluster's jobs")
	jobs.Flags().StringVar(&status, "status", "", "only jobs in this status (queued, running, interrupted, succeeded, failed, cancelled)")
	job := &cobra.Command{
		Use:   "job ID",
		Short: "Show a job of a kubexm server: its state, current task and recent events",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newAPIClient(&jf)
			if err != nil {
				return err
			}
			j, err := c.Job(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if jf.output != "text" {
				return printers.Write(cmd.OutOrStdout(), jf.output, j)
			}
			events, err := c.JobEvents(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			client.WriteJob(cmd.OutOrStdout(), j, events)
			return nil
		},
	}
	addClientFlags(job, &jf)
	return []*cobra.Command{jobs, job}
}

// `kubexm backup list|download` and `kubexm bundle list|delete` reach what
// a kubexm server keeps in a cluster's work directory there: the backups
// it made (backup cluster --server; restore cluster --server finds them by
// name) and the offline bundles uploaded to it (a verb's --offline-bundle
// with --server), hundreds of MiB each, until deleted.

// newBundleCmds are bundle list and bundle delete.
func newBundleCmds() []*cobra.Command {
	list := clusterListCmd("List the offline bundles uploaded to a kubexm server for a cluster, newest first", "bundles",
		"no offline bundles of cluster %[1]s on %[2]s (a verb with --offline-bundle FILE --server %[2]s uploads one)", "SHA256\tSIZE\tAGE", client.BundleRow)
	var f clientFlags
	var cluster string
	del := &cobra.Command{
		Use:   "delete SHA256 --server URL --cluster NAME",
		Short: "Delete an offline bundle uploaded to a kubexm server, unless a job uses it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClusterClient(&f, cluster)
			if err != nil {
				return err
			}
			deleted, err := c.DeleteBundle(cmd.Context(), cluster, args[0])
			if err != nil {
				return err
			}
			if f.output != "text" {
				return printers.Write(cmd.OutOrStdout(), f.output, map[string]string{"cluster": cluster, "deleted": deleted})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted offline bundle %s of cluster %s on %s\n", deleted, cluster, c.Base.Redacted())
			return nil
		},
	}
	addClusterClientFlags(del, &f, &cluster)
	return []*cobra.Command{list, del}
}

func newBackupListCmd() *cobra.Command {
	return clusterListCmd("List the backups a kubexm server made of a cluster", "backups",
		"no backups of cluster %[1]s on %[2]s (kubexm backup cluster -f cluster.yaml --server %[2]s makes one)", "NAME\tSIZE\tAGE\tSHA256", client.BackupRow)
}

// clusterListCmd is a `NOUN list --server URL --cluster NAME` command:
// it shows the items of GET /api/v1/clusters/NAME/ROUTE (the answer's
// key ROUTE) as JSON or as a table of header and a row per item; none
// prints empty, a format given the cluster and the server.
func clusterListCmd[T any](short, route, empty, header string, row func(T) string) *cobra.Command {
	var f clientFlags
	var cluster string
	cmd := &cobra.Command{
		Use:   "list --server URL --cluster NAME",
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClusterClient(&f, cluster)
			if err != nil {
				return err
			}
			items, err := client.ClusterItems[T](cmd.Context(), c, cluster, route)
			if err != nil {
				return err
			}
			if f.output != "text" {
				return printers.Write(cmd.OutOrStdout(), f.output, items)
			}
			if len(items) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), empty+"\n", cluster, c.Base.Redacted())
				return nil
			}
			return client.WriteRows(cmd.OutOrStdout(), header, items, row)
		},
	}
	addClusterClientFlags(cmd, &f, &cluster)
	return cmd
}

func addClusterClientFlags(cmd *cobra.Command, f *clientFlags, cluster *string) {
	addClientFlags(cmd, f)
	cmd.Flags().StringVar(cluster, "cluster", "", "the registered cluster (required)")
}

// newClusterClient is the client of a server verb about one registered
// cluster: --cluster is required.
func newClusterClient(f *clientFlags, cluster string) (*client.Client, error) {
	if cluster == "" {
		return nil, errors.New("--cluster is required: the registered cluster's name (kubexm get clusters --server URL lists them)")
	}
	return newAPIClient(f)
}

func newBackupDownloadCmd() *cobra.Command {
	var f clientFlags
	var cluster, to string
	cmd := &cobra.Command{
		Use:   "download NAME --server URL --cluster NAME [--to FILE]",
		Short: "Download a backup a kubexm server made, checking its size and sha256",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClusterClient(&f, cluster)
			if err != nil {
				return err
			}
			start := time.Now()
			file, n, sum, err := c.DownloadBackup(cmd.Context(), cluster, args[0], to)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "backup %s of cluster %s: %d bytes, sha256 %s, written to %s in %s\n", args[0], cluster, n, sum, file, time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	addClusterClientFlags(cmd, &f, &cluster)
	cmd.Flags().StringVar(&to, "to", "", "the file to write (default: NAME in this directory)")
	return cmd
}
