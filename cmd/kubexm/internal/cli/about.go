package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm"
	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/internal/about"
	"github.com/mensylisir/kubexm/internal/cmdtree"
	"github.com/mensylisir/kubexm/internal/explain"
	"github.com/mensylisir/kubexm/internal/printers"
	"github.com/mensylisir/kubexm/lifecycle"
)

// What this kubexm is and installs: kubexm version, kubexm support and
// kubexm explain FIELD.

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
			if err := printers.Check(output, "text"); err != nil {
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
			return printers.Print(cmd.OutOrStdout(), output, info, func(w io.Writer) error { return info.Write(w, s.KubernetesRange()) })
		},
	}
	addOutputFlag(cmd, &output, "text")
	addRolesPathFlag(cmd, &rolesPath)
	return cmd
}

// newSupportCmd is `kubexm support`: the support matrix of the playbook tree.
func newSupportCmd() *cobra.Command {
	var output string
	var rolesPath []string
	var evidence bool
	cmd := &cobra.Command{
		Use:   "support",
		Short: "Print what this kubexm installs: Kubernetes versions, components and cluster.yaml choices",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := lifecycle.SupportFromRolesPath(rolesPath)
			if err != nil {
				return err
			}
			if !evidence {
				s = s.WithoutEvidence()
			}
			return about.WriteSupport(cmd.OutOrStdout(), output, s, kubexm.Content())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text, json, yaml or markdown (README.md's table)")
	cmd.Flags().BoolVar(&evidence, "evidence", false, "also say, for each installed choice, which tests showed it working")
	addRolesPathFlag(cmd, &rolesPath)
	return cmd
}

// newExplainCmd is `kubexm explain FIELD`: kubectl explain for cluster.yaml.
func newExplainCmd() *cobra.Command {
	var output string
	var rolesPath []string
	cmd := &cobra.Command{
		Use:   "explain FIELD",
		Short: "Describe a field of cluster.yaml: type, default, allowed values, whether kubexm installs them",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := printers.Check(output, "text"); err != nil {
				return err
			}
			s, err := lifecycle.SupportFromRolesPath(rolesPath)
			if err != nil {
				return err
			}
			f, err := explain.Explain(args[0], s)
			if err != nil {
				return &cmdtree.UsageError{Msg: err.Error()}
			}
			return printers.Print(cmd.OutOrStdout(), output, f, f.Write)
		},
	}
	addOutputFlag(cmd, &output, "text")
	addRolesPathFlag(cmd, &rolesPath)
	return cmd
}

// newDocBuiltinsCmd prints reference documentation generated from the
// program's own metadata, so docs/builtins.md can never drift from the code.
func newDocBuiltinsCmd(a *app) *cobra.Command {
	var out string
	bi := &cobra.Command{
		Use:   "builtins [NAME...]",
		Short: "The builtin step types and their arguments (docs/builtins.md)",
		RunE: func(cmd *cobra.Command, names []string) error {
			list, err := builtins.Named(a.Builtins, names)
			if err != nil {
				return err
			}
			md := builtins.Markdown(list)
			if out == "" {
				_, err := fmt.Fprint(cmd.OutOrStdout(), md)
				return err
			}
			return os.WriteFile(out, []byte(md), 0o644)
		},
	}
	bi.Flags().StringVarP(&out, "output", "o", "", "write to this file instead of standard output")
	return bi
}
