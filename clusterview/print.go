package clusterview

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
)

// The tables the read-only verbs print for people; -o json and -o yaml
// print the same structures as they are.

// WriteClusters prints get clusters' table; none is the line for no
// cluster at all.
func WriteClusters(w io.Writer, states []State, none string) error {
	if len(states) == 0 {
		_, err := fmt.Fprintln(w, none)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	asked := slices.ContainsFunc(states, func(s State) bool { return s.Resource != "" })
	head := "NAME\tLAST RUN\tSTATUS\tAGE\tKUBECONFIG\tCA EXPIRES"
	if asked {
		head += "\tCLUSTER RESOURCE"
	}
	fmt.Fprintln(tw, head)
	for _, s := range states {
		last, status, when := "-", "-", "-"
		if s.Last != nil {
			last, status, when = s.Last.Playbook, s.Last.Outcome, Age(s.Last.Start)
		}
		kc, ca := "no", "-"
		if s.Kubeconfig {
			kc = "yes"
		}
		if s.CA != nil {
			ca = fmt.Sprintf("%s (%dd)", s.CA.NotAfter.UTC().Format("2006-01-02"), s.CA.DaysLeft)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s", s.Name, last, status, when, kc, ca)
		if asked {
			fmt.Fprintf(tw, "\t%s", s.Resource)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// WriteNodes prints get nodes' table: the hosts of the cluster file beside
// the Nodes of the cluster.
func WriteNodes(w io.Writer, rows []NodeRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tADDRESS\tROLES\tSTATUS\tAGE\tVERSION")
	for _, r := range rows {
		roles := strings.Join(r.Roles, ",")
		if !r.InFile {
			roles = "(not in cluster file)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Address, roles, r.Status, r.Age, r.Kubelet)
	}
	return tw.Flush()
}

// WriteRuns prints get runs' table of the runs of the work directory dir.
func WriteRuns(w io.Writer, dir string, runs []RunEntry) error {
	if len(runs) == 0 {
		_, err := fmt.Fprintf(w, "no runs in %s\n", dir)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tPLAYBOOK\tSTARTED\tDURATION\tOUTCOME")
	for _, v := range runs {
		d := "-"
		if v.Seconds > 0 {
			d = fmt.Sprintf("%.1fs", v.Seconds)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v.ID, v.Playbook, v.Start, d, v.Outcome)
	}
	return tw.Flush()
}

// Write prints the description as describe cluster shows it.
func (d *Description) Write(w io.Writer) error {
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
	d.writeResource(w)
	fmt.Fprintln(w, "Hosts:")
	var hosts bytes.Buffer
	if err := WriteNodes(&hosts, d.Hosts); err != nil {
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
		fmt.Fprintf(w, "    %s  %-16s %-12s %s ago\n", r.ID, r.Playbook, r.Outcome, Age(r.Start))
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

// writeResource prints the Cluster resource's status: its phase, whether
// its spec is observed, the conditions and the last run.
func (d *Description) writeResource(w io.Writer) {
	r := d.Resource
	if r == nil {
		fmt.Fprintf(w, "Cluster resource: %s\n", d.ResourceNote)
		return
	}
	st := r.Status
	fmt.Fprintf(w, "Cluster resource: %s, generation %d (observed %d), %s nodes Ready, Kubernetes %s\n",
		r.phase(), r.Generation, st.ObservedGeneration, orDash(st.ReadyNodes), orDash(st.KubernetesVersion))
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, c := range st.Conditions {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	if l := st.LastRun; l != nil {
		fmt.Fprintf(tw, "last run\t%s\t%s\t%s %s %s\n", l.Playbook, orDash(l.Result), orDash(l.ID), orDash(l.FinishedAt), l.Message)
	}
	if c := st.Certificates; c != nil {
		fmt.Fprintf(tw, "certificates\tAPI server until %s\tCA until %s\t\n", orDash(c.EarliestExpiry), orDash(c.CAExpiry))
	}
	tw.Flush()
	if b.Len() > 0 {
		writeIndented(w, b.String())
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
