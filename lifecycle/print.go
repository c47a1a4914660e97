package lifecycle

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// How the runs of this package print for people (and, for a command's
// hosts, as JSON lines): plan cluster's plan, run command's hosts, certs
// check's report.

// Write prints the plan of every host and its totals, as one JSON line
// (after the run's events) with format json; runErr is the check run's
// failure, which leaves the plan incomplete (and is returned).
func (s PlanSummary) Write(w io.Writer, format string, runErr error) error {
	if format == "json" {
		data, err := json.Marshal(s)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s\n", data)
		return runErr
	}
	for _, h := range s.Hosts {
		if len(h.Changes) == 0 && len(h.Failed) == 0 {
			fmt.Fprintf(w, "%s: no changes (%d unchanged)\n", h.Host, h.Unchanged)
			continue
		}
		fmt.Fprintf(w, "%s: %d to change, %d unchanged\n", h.Host, len(h.Changes), h.Unchanged)
		for _, c := range h.Changes {
			fmt.Fprintf(w, "  ~ %s\n", c.Task)
			if c.Diff != "" {
				for _, line := range strings.Split(strings.TrimRight(c.Diff, "\n"), "\n") {
					fmt.Fprintf(w, "      %s\n", line)
				}
			}
		}
		for _, c := range h.Failed {
			fmt.Fprintf(w, "  ! %s (%s): %s\n", c.Task, c.Pos, c.Message)
		}
	}
	fmt.Fprintln(w)
	if runErr != nil {
		fmt.Fprintf(w, "\nThe plan is incomplete: the check run stopped (%v).\n", runErr)
		return runErr
	}
	if s.Skipped > 0 {
		fmt.Fprintf(w, "%d tasks skipped: they do not apply, or their check needs an earlier change made first.\n", s.Skipped)
	}
	fmt.Fprintf(w, "Plan: %d to change, %d unchanged.\n", s.ToChange, s.Unchanged)
	return nil
}

// Write prints the outcome of the command on a host: as a JSON line with
// format json, else its status, output and error as ansible's ad-hoc
// commands do.
func (r HostRun) Write(w io.Writer, format string) {
	if format == "json" {
		data, _ := json.Marshal(r)
		fmt.Fprintf(w, "%s\n", data)
		return
	}
	switch r.Status {
	case "unreachable":
		fmt.Fprintf(w, "%s | UNREACHABLE | %s\n", r.Host, r.Error)
		return
	case "failed":
		if r.Error != "" {
			fmt.Fprintf(w, "%s | FAILED | %s\n", r.Host, r.Error)
		} else {
			fmt.Fprintf(w, "%s | FAILED | rc=%d >>\n", r.Host, r.RC)
		}
	default:
		fmt.Fprintf(w, "%s | ok | rc=0 >>\n", r.Host)
	}
	if r.Stdout != "" {
		fmt.Fprintln(w, strings.TrimRight(r.Stdout, "\n"))
	}
	if r.Stderr != "" {
		fmt.Fprintln(w, "stderr:")
		fmt.Fprintln(w, strings.TrimRight(r.Stderr, "\n"))
	}
	if r.Truncated {
		fmt.Fprintln(w, "(output truncated)")
	}
}

// WriteCommandSummary prints the counts of results (a JSON line with
// format json) and returns the exit status they mean (CommandSummary.Err).
func WriteCommandSummary(w io.Writer, format string, results []HostRun) error {
	s := SummarizeCommand(results)
	if format == "json" {
		data, _ := json.Marshal(map[string]any{"kind": "summary", "ok": len(s.OK), "failed": s.Failed, "unreachable": s.Unreachable})
		fmt.Fprintf(w, "%s\n", data)
	} else {
		fmt.Fprintf(w, "\n%d hosts: %d ok, %d failed, %d unreachable\n", len(results), len(s.OK), len(s.Failed), len(s.Unreachable))
	}
	return s.Err()
}

// Write prints the report as kubeadm certs check-expiration does, with
// the host in front.
func (r *CertsReport) Write(w io.Writer) error {
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
