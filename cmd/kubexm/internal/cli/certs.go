package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/builtins/pki"
	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/lifecycle"
	"github.com/mensylisir/kubexm/service/client"
)

// certsCheckFlags are the flags of `kubexm certs check`.
type certsCheckFlags struct {
	inventory  string
	warnWithin string
	output     string
	workDir    string
	rolesPath  []string
	extraVars  []string
}

// newCertsCmd is `kubexm certs`: the certificate verbs on top of the
// certs-* playbooks (renewal and the timer are playbooks and cluster.yaml).
func newCertsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Certificates of a cluster: check their expiry, renew them",
	}
	var f certsCheckFlags
	var remote clientFlags
	check := &cobra.Command{
		Use:   "check",
		Short: "List every certificate and kubeconfig on every host with its expiry, issuer and SANs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if f.inventory, err = clusterFile(f.inventory); err != nil {
				return err
			}
			if remote.server != "" {
				return certsCheckRemote(cmd, f, remote)
			}
			return a.certsCheck(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	fl := check.Flags()
	fl.StringVarP(&f.inventory, "inventory", "i", "", "cluster.yaml describing the hosts")
	addClusterFileFlag(fl, &f.inventory)
	fl.StringVar(&f.warnWithin, "warn-within", "90d", `mark certificates that expire within this time ("90d", "2160h", "1y")`)
	addOutputFlag(check, &f.output, "text")
	fl.StringVar(&f.workDir, "workdir", "", "work directory (default .kubexm/<cluster name>)")
	fl.StringArrayVarP(&f.extraVars, "extra-vars", "e", nil, "set a variable of the playbook: name=value, @file.yaml or a {...} mapping (repeatable)")
	addRolesPathFlag(check, &f.rolesPath)
	addServerFlags(fl, &remote, "check on this kubexm server (URL): the file is registered there, the certs-check playbook runs as a job of its workers and its report is fetched (docs/server.md)", "an operator's (the check is a job)")
	cmd.AddCommand(check)
	return cmd
}

// checkFlags checks certs check's flags and returns --warn-within.
func (f certsCheckFlags) checkFlags() (time.Duration, error) {
	if err := checkOutputFormat(f.output, "text"); err != nil {
		return 0, err
	}
	within, err := pki.ParseValidity(f.warnWithin)
	if err != nil || within < 0 {
		return 0, fmt.Errorf("--warn-within %q: want a duration such as 90d, 2160h or 1y", f.warnWithin)
	}
	return within, nil
}

func (a *app) certsCheck(ctx context.Context, w, errw io.Writer, f certsCheckFlags) error {
	within, err := f.checkFlags()
	if err != nil {
		return err
	}
	data, err := a.runner().CertsCheck(ctx, playFlags{Inventory: f.inventory, Forks: 50, WorkDir: f.workDir,
		RolesPath: f.rolesPath, ExtraVars: f.extraVars, Stderr: os.Stderr}, within, errw)
	if err != nil {
		return err
	}
	return writeCertsReport(w, f.output, "of the playbook", data)
}

// writeCertsReport prints the report of the certs-check playbook (data,
// read from where): as it is with -o json, else as a table.
func writeCertsReport(w io.Writer, format, where string, data []byte) error {
	r, err := lifecycle.ParseCertsReport(data, where)
	if err != nil {
		return err
	}
	if format != "text" {
		// The report as the playbook wrote it, not as certsReport reads it.
		return writeStructured(w, format, json.RawMessage(data))
	}
	return writeCertsTable(w, r)
}

// writeCertsTable prints the report as kubeadm certs check-expiration does,
// with the host in front.
func writeCertsTable(w io.Writer, r *lifecycle.CertsReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tFILE\tSUBJECT\tEXPIRES\tRESIDUAL\tISSUER\tSTATUS\tSANS")
	for _, c := range r.Certificates {
		subject, expires, residual, issuer := c.CommonName, c.NotAfter, "-", c.Issuer
		switch {
		case !c.Exists:
			subject, expires, issuer = "-", "-", "-"
		case c.Kind == "public-key":
			subject, expires, issuer = c.KeyType+" key "+shortFingerprint(c.Fingerprint), "never", "-"
		case c.DaysLeft != nil:
			residual = fmt.Sprintf("%dd", *c.DaysLeft)
		}
		if c.IsCA {
			subject += " (CA)"
		}
		sans := strings.Join(append(append([]string{}, c.SANs.DNS...), c.SANs.IPs...), ",")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Host, c.Path, subject, expires, residual, issuer, strings.ToUpper(c.Status), sans)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d files on the hosts of cluster %s; %d expire within %d days, have expired or are missing\n",
		len(r.Certificates), r.Cluster, r.Problems, r.WarnWithinDays)
	return err
}

func shortFingerprint(f string) string {
	if len(f) > 16 {
		return "sha256:" + f[:16]
	}
	return "sha256:" + f
}

// certsCheckRemote runs the certs-check playbook as a job of a kubexm
// server and prints the report it left in the cluster's work directory
// there (client.CertsReport). As locally, the run's log is shown only
// when it fails.
func certsCheckRemote(cmd *cobra.Command, f certsCheckFlags, remote clientFlags) error {
	within, err := f.checkFlags()
	if err != nil {
		return err
	}
	if extra, err := engine.ParseExtraVars(f.extraVars); err != nil {
		return err
	} else if _, ok := extra["certs_report_path"]; ok {
		return errors.New("-e certs_report_path does not go to a kubexm server: the report is read from the cluster's work directory there")
	}
	vars, err := json.Marshal(map[string]any{"certs_warn_days": int(within / (24 * time.Hour))})
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	c, id, err := queueRemote(cmd, lifecycle.CertsCheckPlaybook, playFlags{Inventory: f.inventory, Check: true, Output: f.output,
		ExtraVars: append(append([]string{}, f.extraVars...), string(vars))}, remote)
	if err != nil {
		return err
	}
	var log bytes.Buffer
	sink, stop := textSink(&log, 0)
	err = c.FollowJob(ctx, id, sink, &log)
	stop()
	if err != nil {
		_, _ = io.Copy(cmd.ErrOrStderr(), &log)
		return err
	}
	data, err := c.CertsReport(ctx, id)
	if errors.Is(err, client.ErrNoReport) {
		return fmt.Errorf("%w; its log:\n%s", err, log.String())
	} else if err != nil {
		return err
	}
	return writeCertsReport(cmd.OutOrStdout(), f.output, "of the server", data)
}
