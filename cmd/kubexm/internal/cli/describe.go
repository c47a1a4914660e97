package cli

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/clusterview"
)

func newDescribeClusterCmd(a *app) *cobra.Command {
	var f clusterFlags
	var remote clientFlags
	cmd := &cobra.Command{
		Use:   "cluster -f cluster.yaml",
		Short: "A cluster's versions, hosts, endpoint, work directory, certificates and nodes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var d *clusterview.Description
			if remote.server != "" {
				var err error
				if d, err = describeRemote(cmd, f, remote); err != nil {
					return err
				}
			} else {
				c, inv, dir, err := loadCluster(f)
				if err != nil {
					return err
				}
				kc, err := a.adminKubeconfig(cmd.Context(), cmd.ErrOrStderr(), f, dir)
				d = clusterview.Describe(cmd.Context(), c, inv, f.file, dir, kc, err)
			}
			if f.output != "text" {
				return writeStructured(cmd.OutOrStdout(), f.output, d)
			}
			return writeDescription(cmd.OutOrStdout(), d)
		},
	}
	addClusterFlags(cmd, &f)
	addRemoteReadFlags(cmd, &f, &remote)
	return cmd
}

func writeDescription(w io.Writer, d *clusterview.Description) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Name:\t%s\n", d.Name)
	fmt.Fprintf(tw, "File:\t%s\n", d.File)
	fmt.Fprintf(tw, "Kubernetes:\t%s\n", d.Kubernetes)
	fmt.Fprintf(tw, "etcd:\t%s\n", d.Etcd)
	fmt.Fprintf(tw, "Container runtime:\t%s\n", d.ContainerRuntime)
	fmt.Fprintf(tw, "Network:\t%s\n", d.Network)
	fmt.Fprintf(tw, "Control plane:\t%s\n", d.Endpoint)
	fmt.Fprintf(tw, "API server:\t%s\n", d.API)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "Hosts:")
	var hosts bytes.Buffer
	if err := writeNodes(&hosts, "text", d.Hosts); err != nil {
		return err
	}
	writeIndented(w, hosts.String())
	st := d.State
	fmt.Fprintf(w, "Work directory: %s\n", st.WorkDir)
	kc := "none yet"
	if st.Kubeconfig {
		kc = filepath.Join(st.WorkDir, "kubeconfig")
	}
	fmt.Fprintf(w, "  admin kubeconfig: %s\n", kc)
	if st.Running != "" {
		fmt.Fprintf(w, "  in use by: %s\n", st.Running)
	}
	fmt.Fprintf(w, "  runs: %d\n", st.Runs)
	for _, r := range d.Runs {
		fmt.Fprintf(w, "    %s  %-16s %-12s %s ago\n", r.ID, r.Playbook, r.Outcome, clusterview.Age(r.Start))
	}
	if len(d.Certificates) == 0 {
		fmt.Fprintln(w, "Certificates: none in the work directory")
		return nil
	}
	fmt.Fprintln(w, "Certificates (work directory, soonest expiry first):")
	var certs bytes.Buffer
	tw = tabwriter.NewWriter(&certs, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tSUBJECT\tEXPIRES\tLEFT\t")
	for _, c := range d.Certificates {
		mark := ""
		if c.DaysLeft < 90 {
			mark = "  renew soon: kubexm certs renew -f " + d.File
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%dd\t%s\n", c.File, c.Subject, c.NotAfter.UTC().Format("2006-01-02"), c.DaysLeft, mark)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeIndented(w, certs.String())
	return nil
}

func writeIndented(w io.Writer, text string) {
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		fmt.Fprintf(w, "  %s\n", l)
	}
}
