package cli

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/builtins/pki"
	"github.com/mensylisir/kubexm/internal/printers"
	"github.com/mensylisir/kubexm/lifecycle"
)

// newCertsCheckCmd is `kubexm certs check`, the certs-check playbook
// (renewal is a verb: certs renew; the timer is cluster.yaml's).
func newCertsCheckCmd(a *app) *cobra.Command {
	var f clusterFlags
	var warnWithin string
	var remote clientFlags
	check := &cobra.Command{
		Use:   "check",
		Short: "List every certificate and kubeconfig on every host with its expiry, issuer and SANs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			file, err := clusterFile(f.file)
			if err != nil {
				return err
			}
			if err := printers.Check(f.output, "text"); err != nil {
				return err
			}
			within, err := pki.ParseValidity(warnWithin)
			if err != nil || within < 0 {
				return fmt.Errorf("--warn-within %q: want a duration such as 90d, 2160h or 1y", warnWithin)
			}
			x, err := a.executor(cmd, remote, f.output)
			if err != nil {
				return err
			}
			req := playFlags{Inventory: file, Output: f.output, Forks: 50, WorkDir: f.workDir, RolesPath: f.rolesPath, ExtraVars: f.extraVars, Stderr: os.Stderr}
			data, err := x.CertsCheck(cmd.Context(), req, within, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			where := "of the playbook"
			if remote.Server != "" {
				where = "of the server"
			}
			r, err := lifecycle.ParseCertsReport(data, where)
			if err != nil {
				return err
			}
			// For programs, the report as the playbook wrote it, not as r
			// reads it.
			return printers.Print(cmd.OutOrStdout(), f.output, json.RawMessage(data), r.Write)
		},
	}
	addClusterFlags(check, &f, "text")
	check.Flags().StringVarP(&f.file, "inventory", "i", "", "cluster.yaml describing the hosts")
	check.Flags().StringVar(&warnWithin, "warn-within", "90d", `mark certificates that expire within this time ("90d", "2160h", "1y")`)
	addExtraVarsFlag(check.Flags(), &f.extraVars)
	addServerFlags(check.Flags(), &remote, "check on this kubexm server (URL): the file is registered there, the certs-check playbook runs as a job of its workers and its report is fetched (docs/server.md)", "an operator's (the check is a job)")
	return check
}
