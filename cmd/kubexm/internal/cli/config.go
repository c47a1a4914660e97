package cli

import (
	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/internal/printers"
	"github.com/mensylisir/kubexm/lifecycle"
	"github.com/mensylisir/kubexm/schema"
)

func newConfigValidateCmd() *cobra.Command {
	var file, output string
	var rolesPath []string
	cmd := &cobra.Command{
		Use:          "validate",
		Short:        "Check a cluster file and report every problem in it",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := printers.Check(output, "text"); err != nil {
				return err
			}
			file, err := clusterFile(file)
			if err != nil {
				return err
			}
			return lifecycle.ValidateFile(cmd.OutOrStdout(), cmd.ErrOrStderr(), file, rolesPath, output)
		},
	}
	addClusterFileFlag(cmd.Flags(), &file)
	addOutputFlag(cmd, &output, "text")
	addRolesPathFlag(cmd, &rolesPath)
	return cmd
}

func newConfigViewCmd() *cobra.Command {
	var file, output string
	var rolesPath []string
	var resource bool
	cmd := &cobra.Command{
		Use:          "view",
		Short:        "Print the cluster file with every default filled in and secrets masked",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := printers.Check(output); err != nil {
				return err
			}
			file, err := clusterFile(file)
			if err != nil {
				return err
			}
			out, warnings, err := lifecycle.ViewCluster(file, rolesPath, resource, output)
			schema.WriteWarnings(cmd.ErrOrStderr(), warnings)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	addClusterFileFlag(cmd.Flags(), &file)
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "yaml or json")
	cmd.Flags().BoolVar(&resource, "resource", false, "print the Cluster resource for kubectl apply --server-side: passwords and passphrases left out, not masked (deploy/crd)")
	addRolesPathFlag(cmd, &rolesPath)
	return cmd
}

func newConfigConvertCmd() *cobra.Command {
	var file, output string
	var force bool
	cmd := &cobra.Command{
		Use:          "convert",
		Short:        "Convert a KubeKey v3 cluster file to the kubexm form",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			file, err := clusterFile(file)
			if err != nil {
				return err
			}
			out, warnings, err := schema.ConvertFile(file)
			schema.WriteWarnings(cmd.ErrOrStderr(), warnings)
			if err != nil {
				return err
			}
			// The file may carry passwords, so it is private like the input should be.
			o := lifecycle.OutFile{Path: output, Perm: 0o600, Force: force, Input: file}
			return o.Write(cmd.OutOrStdout(), cmd.ErrOrStderr(), out, "converted file", "")
		},
	}
	addClusterFileFlag(cmd.Flags(), &file)
	cmd.Flags().StringVarP(&output, "output", "o", "", "output file (default: standard output)")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite an existing output file, even the input")
	return cmd
}

func newCreateConfigCmd() *cobra.Command {
	var version, output, name string
	var force bool
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Write a commented sample cluster.yaml (an all-in-one cluster on this machine)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			text, err := lifecycle.SampleConfig(name, version)
			if err != nil {
				return err
			}
			o := lifecycle.OutFile{Path: output, Perm: 0o644, Force: force}
			return o.Write(cmd.OutOrStdout(), cmd.ErrOrStderr(), []byte(text), "sample", "; check it with: kubexm config validate -f "+output)
		},
	}
	cmd.Flags().StringVar(&version, "kubernetes-version", schema.DefaultKubernetesVersion, "Kubernetes version: a patch of a minor kubexm support lists, or the minor alone (its newest checked patch)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output file (default: standard output)")
	cmd.Flags().StringVar(&name, "name", "mycluster", "cluster name")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite an existing output file")
	return cmd
}
