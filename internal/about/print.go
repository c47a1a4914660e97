package about

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Write prints info as kubexm version shows it; kubernetesRange is the
// support matrix's (matrix.Support.KubernetesRange).
func (info Info) Write(w io.Writer, kubernetesRange string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "kubexm\t%s\n", info.Version)
	fmt.Fprintf(tw, "commit\t%s\n", info.Commit)
	fmt.Fprintf(tw, "built\t%s\n", info.BuildDate)
	fmt.Fprintf(tw, "go\t%s %s\n", info.GoVersion, info.Platform)
	fmt.Fprintf(tw, "kubernetes\t%s\n", kubernetesRange)
	for _, c := range info.Components {
		fmt.Fprintf(tw, "%s\t%s (release line %s)\n", c.Name, c.Default, c.ReleaseLine)
	}
	fmt.Fprintln(tw, "\nkubexm support lists every cluster.yaml choice and whether it is installed")
	return tw.Flush()
}

// Defaults are the versions the roles install by default, by component.
func (info Info) Defaults() map[string]string {
	m := make(map[string]string, len(info.Components))
	for _, c := range info.Components {
		m[c.Name] = c.Default
	}
	return m
}
