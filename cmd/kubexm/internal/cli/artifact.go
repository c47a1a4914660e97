package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/lifecycle"
)

// newArtifactCmds are artifact export and artifact images push.
func newArtifactCmds(a *app) (export, push *cobra.Command) {
	var f clusterFlags
	var verbose int
	var playbook string
	export = &cobra.Command{
		Use:   "export",
		Short: "Fetch every binary and image cluster.yaml needs and pack them into an offline bundle",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			file, err := clusterFile(f.file)
			if err != nil {
				return err
			}
			// The export runs as `kubexm play` would run it.
			w := cmd.OutOrStdout()
			e, err := a.Runner.Export(cmd.Context(), lifecycle.ExportRequest{Output: f.output, Run: playFlags{
				Playbook: playbook, Inventory: file, ExtraVars: f.extraVars, Forks: 50, Output: "text",
				Verbose: verbose, RolesPath: f.rolesPath, WorkDir: f.workDir, Stdout: w, Stderr: os.Stderr,
			}})
			if err != nil {
				return err
			}
			e.Write(w, f.output, file)
			return nil
		},
	}
	addClusterFlags(export, &f, "")
	fl := export.Flags()
	fl.StringVarP(&f.output, "output", "o", "bundle.tar.gz", "the bundle to write: gzip, or zstd (faster, smaller) when named .tar.zst or .tzst")
	addExtraVarsFlag(fl, &f.extraVars)
	fl.CountVarP(&verbose, "verbose", "v", "show stdout/stderr of every task (-vv: also progress)")
	fl.StringVar(&playbook, "playbook", lifecycle.ExportPlaybook, "the playbook that fetches the artifacts (a fork of artifact-export)")
	var pf clusterFlags
	var req lifecycle.PushRequest
	push = &cobra.Command{
		Use:   "push",
		Short: "Push every image the cluster needs to registry.privateRegistry",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if req.Inventory, err = clusterFile(pf.file); err != nil {
				return err
			}
			req.WorkDir, req.RolesPath = pf.workDir, pf.rolesPath
			return lifecycle.PushImages(cmd.Context(), cmd.OutOrStdout(), req)
		},
	}
	addClusterFlags(push, &pf, "")
	push.Flags().StringVar(&req.OfflineBundle, "offline-bundle", "", "push the images of this bundle of kubexm artifact export (verified and unpacked into the work directory)")
	push.Flags().IntVar(&req.Jobs, "jobs", 4, "images pushed at once")
	return export, push
}
