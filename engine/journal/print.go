package journal

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteLog prints a run and its entries as kubexm logs shows them: a line
// per task and host, and under a failure its message and output's tail.
func WriteLog(w io.Writer, info RunInfo, entries []LogEntry) {
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
