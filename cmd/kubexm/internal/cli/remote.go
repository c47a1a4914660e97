package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mensylisir/kubexm/engine/output"
	"github.com/mensylisir/kubexm/service/jobstore"
)

// A verb given --server URL runs on a kubexm server instead of this
// machine: the cluster file is registered there (a new config version),
// the offline bundle uploaded unless the server has it, the playbook
// queued as a job with the verb's options, and the job's events followed
// here and shown as a local run shows them.

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
	fl.StringVar(&f.server, "server", "", serverHelp)
	fl.StringVar(&f.token, "token", "", "API token for --server: "+tokenRole+" (default $KUBEXM_TOKEN)")
	fl.StringVar(&f.ca, "ca", "", "CA certificate to trust --server with (its self-signed DATA-DIR/tls/cert.pem)")
	fl.BoolVar(&f.insecure, "insecure-skip-tls-verify", false, "do not check --server's certificate")
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

// localOnlyFlags are run flags a job cannot carry: they name files or
// state on this machine, or tune the engine of the run itself.
var localOnlyFlags = []string{"start-at-task", "forks", "resume", "roles-path", "overlay", "workdir", "no-journal", "backup"}

// playRemote runs playbook with f on the server of cf, as a job.
func playRemote(cmd *cobra.Command, playbook string, f playFlags, cf clientFlags) error {
	c, id, err := queueRemote(cmd, playbook, f, cf)
	if err != nil {
		return err
	}
	if f.Output == "json" {
		return c.FollowJob(cmd.Context(), id, output.NewJSON(cmd.OutOrStdout()), cmd.ErrOrStderr())
	}
	sink, stop := textSink(cmd.OutOrStdout(), f.Verbose)
	defer stop()
	return c.FollowJob(cmd.Context(), id, sink, cmd.ErrOrStderr())
}

// queueRemote registers the cluster file of f on the server of cf (a new
// config version), uploads its offline bundle unless the server has it,
// and queues playbook with f's options; it returns the client and the
// job's id. A restore's --backup names a backup on the server.
func queueRemote(cmd *cobra.Command, playbook string, f playFlags, cf clientFlags, more ...func(*jobstore.Options)) (*apiClient, string, error) {
	for _, name := range localOnlyFlags {
		if (name == "backup" && playbook == "restore") || (name == "forks" && playbook == jobstore.CommandPlaybook) {
			continue // carried by the job
		}
		if fl := cmd.Flags().Lookup(name); fl != nil && fl.Changed {
			return nil, "", fmt.Errorf("--%s does not go to a kubexm server (a job carries --tags, --skip-tags, --limit, --check, --diff, -e and --offline-bundle); run without --server to use it", name)
		}
	}
	if strings.ContainsRune(f.Backup, '/') {
		return nil, "", fmt.Errorf("--backup %s: with --server it names a backup the server made (kubexm backup list --server %s --cluster NAME), not a file here", f.Backup, cf.server)
	}
	cf.output = f.Output
	c, err := newAPIClient(&cf)
	if err != nil {
		return nil, "", err
	}
	id, err := c.QueueRun(cmd.Context(), playbook, f, cmd.ErrOrStderr(), more...)
	return c, id, err
}
