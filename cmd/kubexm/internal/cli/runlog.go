package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/clusterview"
	"github.com/mensylisir/kubexm/engine"
)

func newGetRunsCmd() *cobra.Command {
	var f clusterFlags
	cmd := &cobra.Command{
		Use:   "runs -f cluster.yaml",
		Short: "The runs of the cluster's work directory, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, _, dir, err := loadCluster(f)
			if err != nil {
				return err
			}
			views, err := clusterview.RunList(dir)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if f.output != "text" {
				return writeStructured(w, f.output, views)
			}
			if len(views) == 0 {
				fmt.Fprintf(w, "no runs in %s\n", dir)
				return nil
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "RUN\tPLAYBOOK\tSTARTED\tDURATION\tOUTCOME")
			for _, v := range views {
				d := "-"
				if v.Seconds > 0 {
					d = fmt.Sprintf("%.1fs", v.Seconds)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v.ID, v.Playbook, v.Start, d, v.Outcome)
			}
			return tw.Flush()
		},
	}
	addClusterFlags(cmd, &f)
	return cmd
}

type logsFlags struct {
	cluster clusterFlags
	host    string
	failed  bool
}

func newLogsCmd() *cobra.Command {
	var f logsFlags
	cmd := &cobra.Command{
		Use:   "logs RUN -f cluster.yaml",
		Short: "What a run did, task by task and host by host, from its journal",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, _, dir, err := loadCluster(f.cluster)
			if err != nil {
				return err
			}
			info, shown, err := clusterview.RunLog(dir, args[0], f.host, f.failed)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if f.cluster.output != "text" {
				return writeStructured(w, f.cluster.output, map[string]any{"run": info.ID, "playbook": info.Playbook,
					"outcome": info.Outcome, "tasks": shown})
			}
			writeRunLog(w, info, shown)
			return nil
		},
	}
	addClusterFlags(cmd, &f.cluster)
	cmd.Flags().StringVar(&f.host, "host", "", "only this host's tasks")
	cmd.Flags().BoolVar(&f.failed, "failed", false, "only the tasks that failed, were unreachable or whose failure was ignored")
	return cmd
}

func writeRunLog(w io.Writer, info engine.RunInfo, entries []engine.LogEntry) {
	outcome := info.Outcome
	if outcome == "" {
		outcome = "no end recorded (running, or killed)"
	}
	fmt.Fprintf(w, "run %s: playbook %s, started %s, %s\n", info.ID, info.Playbook, info.Start.UTC().Format(time.RFC3339), outcome)
	for _, e := range entries {
		task := e.Task
		if e.Role != "" {
			task = e.Role + " : " + task
		}
		rc := ""
		if e.RC != nil {
			rc = fmt.Sprintf(" rc=%d", *e.RC)
		}
		fmt.Fprintf(w, "%s  %-4s %-11s %6.2fs%s  %s", e.Time.UTC().Format("15:04:05.000"), e.Host, e.Status, float64(e.DurationMS)/1000, rc, task)
		if e.Pos != "" {
			fmt.Fprintf(w, "  (%s)", e.Pos)
		}
		fmt.Fprintln(w)
		if e.Hidden {
			fmt.Fprintln(w, "      output hidden (no_log, or it held a secret)")
		}
		for _, part := range []struct{ name, text string }{{"msg", e.Message}, {"stdout", e.StdoutTail}, {"stderr", e.StderrTail}} {
			if part.text == "" {
				continue
			}
			fmt.Fprintf(w, "      %s:\n", part.name)
			for _, l := range strings.Split(part.text, "\n") {
				fmt.Fprintf(w, "        %s\n", l)
			}
		}
	}
}
