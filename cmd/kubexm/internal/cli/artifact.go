package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/bundle"
	"github.com/mensylisir/kubexm/lifecycle"
)

type exportFlags struct {
	file      string
	output    string
	workDir   string
	extraVars []string
	rolesPath []string
	verbose   int
	playbook  string
}

func newArtifactCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "artifact",
		Short: "Offline bundles: every binary and image a cluster needs, in one file",
	}
	var f exportFlags
	export := &cobra.Command{
		Use:   "export",
		Short: "Fetch every binary and image cluster.yaml needs and pack them into an offline bundle",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if f.file, err = clusterFile(f.file); err != nil {
				return err
			}
			return a.exportBundle(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	fl := export.Flags()
	addClusterFileFlag(fl, &f.file)
	fl.StringVarP(&f.output, "output", "o", "bundle.tar.gz", "the bundle to write")
	fl.StringVar(&f.workDir, "workdir", "", "work directory the files are fetched into (default .kubexm/<cluster name>)")
	fl.StringArrayVarP(&f.extraVars, "extra-vars", "e", nil, "set a variable: name=value, @file.yaml or a {...} mapping (repeatable)")
	fl.StringSliceVar(&f.rolesPath, "roles-path", nil, "directories searched for roles before the built-in ones")
	fl.CountVarP(&f.verbose, "verbose", "v", "show stdout/stderr of every task (-vv: also progress)")
	fl.StringVar(&f.playbook, "playbook", lifecycle.ExportPlaybook, "the playbook that fetches the artifacts (a fork of artifact-export)")
	cmd.AddCommand(export, newArtifactImagesCmd())
	return cmd
}

func (a *app) exportBundle(ctx context.Context, w io.Writer, f exportFlags) error {
	// The export runs as `kubexm play` would run it.
	e, err := a.runner().Export(ctx, lifecycle.ExportRequest{Output: f.output, Run: playFlags{
		Playbook: f.playbook, Inventory: f.file, ExtraVars: f.extraVars, Forks: 50, Output: "text",
		Verbose: f.verbose, RolesPath: f.rolesPath, WorkDir: f.workDir, Stdout: w, Stderr: os.Stderr,
	}})
	if err != nil {
		return err
	}
	var total int64
	kinds := map[string]int{}
	for _, art := range e.Manifest.Artifacts {
		total += art.Size
		kinds[art.Kind]++
	}
	fmt.Fprintf(w, "\nwrote %s: %d files (%s) for cluster %s, %d MiB packed from %d MiB, sha256 %s (packed in %s, %s in all)\n",
		f.output, len(e.Manifest.Artifacts), kindSummary(kinds), e.Manifest.Cluster, e.Size>>20, total>>20, e.SHA256,
		e.Packing.Round(time.Millisecond), e.Total.Round(time.Millisecond))
	fmt.Fprintf(w, "install with: kubexm play create-cluster -i %s --offline-bundle %s\n", f.file, f.output)
	return nil
}

func kindSummary(kinds map[string]int) string {
	var parts []string
	for _, k := range bundle.Kinds() {
		if n := kinds[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, plural(k, n)))
		}
	}
	return strings.Join(parts, ", ")
}

func plural(s string, n int) string {
	if n == 1 {
		return s
	}
	if strings.HasSuffix(s, "y") {
		return s[:len(s)-1] + "ies"
	}
	return s + "s"
}
