package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm"
	"github.com/mensylisir/kubexm/internal/about"
	"github.com/mensylisir/kubexm/lifecycle"
)

// commit and buildDate are set by release builds with
// -ldflags "-X github.com/mensylisir/kubexm/cmd/kubexm/internal/cli.commit=..." (and buildDate), as version is; the
// linker can only set package-level strings. Empty, they are read from Go's
// build information (vcs.revision, vcs.time).
var commit, buildDate string

// newVersionCmd is `kubexm version`: the binary and what it installs.
func newVersionCmd() *cobra.Command {
	var output string
	var rolesPath []string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print kubexm's version, commit, build date and the Kubernetes and component versions it installs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutputFormat(output, "text"); err != nil {
				return err
			}
			s, err := lifecycle.SupportFromRolesPath(rolesPath)
			if err != nil {
				return err
			}
			info, err := about.Collect(about.Build{Version: version, Commit: commit, Date: buildDate}, s, kubexm.Content())
			if err != nil {
				return err
			}
			if output != "text" {
				return writeStructured(cmd.OutOrStdout(), output, info)
			}
			return writeVersionText(cmd.OutOrStdout(), info, s.KubernetesRange())
		},
	}
	addOutputFlag(cmd, &output, "text")
	addRolesPathFlag(cmd, &rolesPath)
	return cmd
}

func writeVersionText(w io.Writer, info about.Info, kubernetesRange string) error {
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
