package client

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mensylisir/kubexm/clusterview"
	"github.com/mensylisir/kubexm/service/api"
	"github.com/mensylisir/kubexm/service/jobstore"
)

// The tables the server verbs print for people; -o json and -o yaml print
// the server's answers as they are.

// WriteJobs prints get jobs' table.
func WriteJobs(w io.Writer, jobs []jobstore.Job) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCLUSTER\tPLAYBOOK\tSTATUS\tTASK\tAGE")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", j.ID, j.Cluster, j.Playbook, j.Status, orDash(j.CurrentTask), clusterview.Age(j.CreatedAt))
	}
	return tw.Flush()
}

// WriteJob prints get job's view of a job and the last of its events.
func WriteJob(w io.Writer, j jobstore.Job, events []jobstore.Event) {
	fmt.Fprintf(w, "Job:       %s\nCluster:   %s (config version %d)\nPlaybook:  %s\nStatus:    %s\n", j.ID, j.Cluster, j.ConfigVersion, j.Playbook, j.Status)
	if j.CurrentTask != "" {
		fmt.Fprintf(w, "Task:      %s\n", j.CurrentTask)
	}
	if j.Error != "" {
		fmt.Fprintf(w, "Error:     %s\n", j.Error)
	}
	fmt.Fprintf(w, "Worker:    %s\nAttempts:  %d\nCreated:   %s by %s\n", orDash(j.Worker), j.Attempts, j.CreatedAt.Format(time.RFC3339), orDash(j.CreatedBy))
	if !j.FinishedAt.IsZero() {
		fmt.Fprintf(w, "Finished:  %s (took %s)\n", j.FinishedAt.Format(time.RFC3339), j.FinishedAt.Sub(j.StartedAt).Round(time.Second))
	}
	if n := len(events); n > 0 {
		fmt.Fprintln(w, "Events:")
		for _, e := range events[max(0, n-15):] {
			fmt.Fprintf(w, "  %s  %-14s %s\n", e.Time.Format("15:04:05"), e.Kind, strings.TrimSpace(strings.Join([]string{e.Host, e.Task, e.Status}, " ")))
		}
	}
}

// WriteRows prints items as a table: header, then a line of row for each
// (BackupRow, BundleRow).
func WriteRows[T any](w io.Writer, header string, items []T, row func(T) string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, it := range items {
		fmt.Fprintln(tw, row(it))
	}
	return tw.Flush()
}

// BackupRow is backup list's line of a backup.
func BackupRow(b api.Backup) string {
	return fmt.Sprintf("%s\t%d MiB\t%s\t%s", b.Name, b.Size>>20, clusterview.Age(b.CreatedAt), orDash(b.SHA256))
}

// BundleRow is bundle list's line of an uploaded offline bundle.
func BundleRow(b api.Bundle) string {
	return fmt.Sprintf("%s\t%d MiB\t%s", b.SHA256, b.Size>>20, clusterview.Age(b.UploadedAt))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
