package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/clusterview"
	"github.com/mensylisir/kubexm/service/client"
)

// clientFlags reach a kubexm server.
type clientFlags struct {
	server   string
	token    string
	ca       string
	insecure bool
	output   string
}

func addClientFlags(cmd *cobra.Command, f *clientFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.server, "server", os.Getenv("KUBEXM_SERVER"), "URL of kubexm server (default $KUBEXM_SERVER)")
	fl.StringVar(&f.token, "token", "", "API token (default $KUBEXM_TOKEN)")
	fl.StringVar(&f.ca, "ca", "", "CA certificate to trust the server with (its self-signed DATA-DIR/tls/cert.pem)")
	fl.BoolVar(&f.insecure, "insecure-skip-tls-verify", false, "do not check the server's certificate")
	fl.StringVarP(&f.output, "output", "o", "text", "output format: text, json or yaml")
}

// apiClient is the client of the kubexm API the verbs with --server use.
type apiClient = client.Client

// newAPIClient is the client of the server f names, for output f.output.
func newAPIClient(f *clientFlags) (*apiClient, error) {
	if f.server == "" {
		return nil, errors.New("no server: give --server URL or set KUBEXM_SERVER")
	}
	if err := checkOutputFormat(f.output, "text"); err != nil {
		return nil, err
	}
	return client.New(client.Options{Server: f.server, Token: f.token, CA: f.ca, Insecure: f.insecure})
}

// printDoc prints v as -o asks for a document: indented JSON, or the same
// document in YAML.
func printDoc(w io.Writer, format string, v any) error {
	if format == "yaml" {
		return writeStructured(w, format, v)
	}
	return printJSON(w, v)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// newGetJobsCmds are `kubexm get jobs` and `kubexm get job ID`.
func newGetJobsCmds() []*cobra.Command {
	return []*cobra.Command{newGetJobsCmd(), newGetJobCmd()}
}

// newGetJobsCmd is `kubexm get jobs`.
func newGetJobsCmd() *cobra.Command {
	var f clientFlags
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
			if f.output != "text" {
				return printDoc(cmd.OutOrStdout(), f.output, jobs)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tCLUSTER\tPLAYBOOK\tSTATUS\tTASK\tAGE")
			for _, j := range jobs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", j.ID, j.Cluster, j.Playbook, j.Status, orDash(j.CurrentTask), clusterview.Age(j.CreatedAt))
			}
			return tw.Flush()
		},
	}
	addClientFlags(jobs, &f)
	jobs.Flags().StringVar(&cluster, "cluster", "", "only this cluster's jobs")
	jobs.Flags().StringVar(&status, "status", "", "only jobs in this status (queued, running, interrupted, succeeded, failed, cancelled)")
	return jobs
}

// newGetJobCmd is `kubexm get job ID`.
func newGetJobCmd() *cobra.Command {
	var jf clientFlags
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
				return printDoc(cmd.OutOrStdout(), jf.output, j)
			}
			w := cmd.OutOrStdout()
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
			events, err := c.JobEvents(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if n := len(events); n > 0 {
				fmt.Fprintln(w, "Events:")
				for _, e := range events[max(0, n-15):] {
					fmt.Fprintf(w, "  %s  %-14s %s\n", e.Time.Format("15:04:05"), e.Kind, strings.TrimSpace(strings.Join([]string{e.Host, e.Task, e.Status}, " ")))
				}
			}
			return nil
		},
	}
	addClientFlags(job, &jf)
	return job
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// newGetCmd is `kubexm get` with a server's jobs; addVerbCmds adds
// clusters and nodes to it.
func newGetCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "get", Short: "Show clusters, nodes, and the jobs of a kubexm server"}
	cmd.AddCommand(newGetJobsCmds()...)
	return cmd
}
