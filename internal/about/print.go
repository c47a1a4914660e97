package about

import (
	"fmt"
	"io"
	"io/fs"
	"text/tabwriter"

	"github.com/mensylisir/kubexm/internal/printers"
	"github.com/mensylisir/kubexm/schema/matrix"
)

// WriteSupport prints the support matrix s as kubexm support shows it:
// text (with the versions the roles of content install by default),
// markdown (README.md's table), json or yaml.
func WriteSupport(w io.Writer, output string, s *matrix.Support, content fs.FS) error {
	switch output {
	case "text":
		info, err := Collect(Build{}, s, content)
		if err != nil {
			return err
		}
		s.WriteText(w, info.Defaults())
		return nil
	case "markdown":
		_, err := io.WriteString(w, s.Markdown())
		return err
	}
	if err := printers.Check(output, "text", "markdown"); err != nil {
		return err
	}
	return printers.Write(w, output, s)
}

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
