package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/mensylisir/kubexm/lifecycle"
	"github.com/spf13/cobra"
)

type kubeconfigFlags struct {
	file, workDir, to string
	rolesPath         []string
	extraVars         []string
}

func newGetKubeconfigCmd(a *app) *cobra.Command {
	var f kubeconfigFlags
	cmd := &cobra.Command{
		Use:   "kubeconfig -f cluster.yaml",
		Short: "The cluster's admin kubeconfig, from the cluster itself",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.getKubeconfig(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	fl := cmd.Flags()
	addClusterFileFlag(fl, &f.file)
	fl.StringVar(&f.workDir, "workdir", "", "work directory (default .kubexm/<cluster name>)")
	fl.StringVar(&f.to, "to", "", "write the kubeconfig to this file (0600) instead of printing it")
	fl.StringSliceVar(&f.rolesPath, "roles-path", nil, "directories searched for roles before the built-in ones")
	fl.StringArrayVarP(&f.extraVars, "extra-vars", "e", nil, "set a variable: name=value, @file.yaml or a {...} mapping (repeatable)")
	return cmd
}

func (a *app) getKubeconfig(ctx context.Context, w, errw io.Writer, f kubeconfigFlags) error {
	file, err := clusterFile(f.file)
	if err != nil {
		return err
	}
	f.file = file
	data, err := a.runner().Kubeconfig(ctx, lifecycle.KubeconfigRequest{Inventory: file, WorkDir: f.workDir, RolesPath: f.rolesPath, ExtraVars: f.extraVars}, errw)
	if err != nil {
		return err
	}
	if f.to == "" {
		_, err = w.Write(data)
		return err
	}
	if err := os.WriteFile(f.to, data, 0o600); err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	// WriteFile keeps the mode of a file that exists: a kubeconfig is a key.
	if err := os.Chmod(f.to, 0o600); err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	fmt.Fprintf(errw, "wrote %s (the cluster's admin kubeconfig; kubectl --kubeconfig %s get nodes)\n", f.to, f.to)
	return nil
}
