package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/builtins/pki"
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

// certsReport is what roles/certs writes (certs_report_path): one entry per
// file and host.
type certsReport struct {
	Cluster        string      `json:"cluster"`
	WarnWithinDays int         `json:"warn_within_days"`
	Problems       int         `json:"problems"`
	Certificates   []certEntry `json:"certificates"`
}

type certEntry struct {
	Host        string   `json:"host"`
	Path        string   `json:"path"`
	Status      string   `json:"status"`
	Exists      bool     `json:"exists"`
	Kind        string   `json:"kind"`
	CommonName  string   `json:"common_name"`
	Issuer      string   `json:"issuer"`
	NotAfter    string   `json:"not_after"`
	DaysLeft    *int     `json:"days_left"`
	IsCA        bool     `json:"is_ca"`
	Serial      string   `json:"serial"`
	KeyType     string   `json:"key_type"`
	Fingerprint string   `json:"fingerprint"`
	SANs        sansList `json:"sans"`
}

type sansList struct {
	DNS []string `json:"dns"`
	IPs []string `json:"ips"`
}

// newCertsCmd is `kubexm certs`: the certificate verbs on top of the
// certs-* playbooks (renewal and the timer are playbooks and cluster.yaml).
func newCertsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Certificates of a cluster: check their expiry, renew them",
	}
	var f certsCheckFlags
	check := &cobra.Command{
		Use:   "check",
		Short: "List every certificate and kubeconfig on every host with its expiry, issuer and SANs",
		Long: `Run the certs-check playbook on every etcd and Kubernetes host (it only reads)
and print one line per certificate, kubeconfig and service-account key:
host, file, subject, expiry, time left, issuing CA. A file that expires within
--warn-within (default 90d), has expired or is missing is marked; the
summary counts them. -o json prints the playbook's report as it is.`,
		Example: `  kubexm certs check -i cluster.yaml
  kubexm certs check -i cluster.yaml --warn-within 30d -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.certsCheck(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	fl := check.Flags()
	fl.StringVarP(&f.inventory, "inventory", "i", "", "cluster.yaml describing the hosts")
	fl.StringVarP(&f.inventory, "file", "f", "", "the cluster file (same as -i, as the other verbs take it)")
	fl.StringVar(&f.warnWithin, "warn-within", "90d", `mark certificates that expire within this time ("90d", "2160h", "1y")`)
	fl.StringVarP(&f.output, "output", "o", "text", "text or json")
	fl.StringVar(&f.workDir, "workdir", "", "work directory (default .kubexm/<cluster name>)")
	fl.StringArrayVarP(&f.extraVars, "extra-vars", "e", nil, "set a variable of the playbook: name=value, @file.yaml or a {...} mapping (repeatable)")
	addRolesPathFlag(check, &f.rolesPath)
	cmd.AddCommand(check)
	return cmd
}

func (a *app) certsCheck(ctx context.Context, w, errw io.Writer, f certsCheckFlags) error {
	if f.output != "text" && f.output != "json" {
		return fmt.Errorf("--output must be text or json, not %q", f.output)
	}
	if f.inventory == "" {
		return fmt.Errorf("no inventory: pass the cluster description with -f (or -i) cluster.yaml")
	}
	within, err := pki.ParseValidity(f.warnWithin)
	if err != nil || within < 0 {
		return fmt.Errorf("--warn-within %q: want a duration such as 90d, 2160h or 1y", f.warnWithin)
	}
	tmp, err := os.MkdirTemp("", "kubexm-certs-check-")
	if err != nil {
		return fmt.Errorf("temporary directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	reportPath := filepath.Join(tmp, "report.json")
	vars, err := json.Marshal(map[string]any{"certs_warn_days": int(within / (24 * time.Hour)), "certs_report_path": reportPath})
	if err != nil {
		return err
	}
	// The playbook only reads: as a check run it takes no lock and writes
	// no journal, so it can run beside another kubexm run. Its log is shown
	// only when it fails.
	var log bytes.Buffer
	err = a.play(ctx, &log, "certs-check", playFlags{
		inventory: f.inventory, check: true, output: "text", forks: 50, workDir: f.workDir, rolesPath: f.rolesPath,
		extraVars: append(append([]string{}, f.extraVars...), string(vars)),
	})
	if err != nil {
		_, _ = io.Copy(errw, &log)
		return err
	}
	data, err := os.ReadFile(reportPath)
	if err != nil {
		return fmt.Errorf("the certs-check playbook wrote no report (%w); its log:\n%s", err, log.String())
	}
	var r certsReport
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("the certs-check report %s: %w", reportPath, err)
	}
	if f.output == "json" {
		var out bytes.Buffer
		if err := json.Indent(&out, data, "", "  "); err != nil {
			return err
		}
		out.WriteByte('\n')
		_, err := w.Write(out.Bytes())
		return err
	}
	return writeCertsTable(w, &r)
}

// writeCertsTable prints the report as kubeadm certs check-expiration does,
// with the host in front.
func writeCertsTable(w io.Writer, r *certsReport) error {
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
