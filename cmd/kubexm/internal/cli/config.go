package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/mensylisir/kubexm/internal/printers"

	"github.com/mensylisir/kubexm/schema/validate"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"

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
			c, warnings, loadErr := lifecycle.LoadWith(file, rolesPath)
			if output == "text" {
				schema.WriteWarnings(cmd.ErrOrStderr(), warnings)
				if loadErr != nil {
					return loadErr
				}
			}
			v, err := validate.NewValidation(file, c, warnings, loadErr)
			if err != nil {
				// Not a cluster file's problem (unreadable, no such
				// file): no verdict on its content to print.
				return err
			}
			if err := printers.Print(cmd.OutOrStdout(), output, v, v.Write); err != nil || loadErr == nil {
				return err
			}
			// An invalid file is still an error (exit 1) after the verdict
			// for programs, so that scripts need not parse it to know.
			return fmt.Errorf("%s is not valid: %d problems: %w", file, len(v.Problems), loadErr)
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
			out, warnings, err := lifecycle.ViewCluster(file, rolesPath, resource)
			schema.WriteWarnings(cmd.ErrOrStderr(), warnings)
			if err != nil {
				return err
			}
			// The JSON is the YAML converted: the same keys, the file's.
			if output == "json" {
				if out, err = yaml.YAMLToJSON(out); err != nil {
					return fmt.Errorf("encode json: %w", err)
				}
				return printers.Write(cmd.OutOrStdout(), output, json.RawMessage(out))
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
			if output == "" || output == "-" {
				_, err = cmd.OutOrStdout().Write(out)
				return err
			}
			// The file may carry passwords, so it is private like the input should be.
			if err := lifecycle.WriteNewFile(output, out, 0o600, force, file); err != nil {
				return fmt.Errorf("write converted file: %w", err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", output)
			return nil
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
			if output == "" || output == "-" {
				_, err := io.WriteString(cmd.OutOrStdout(), text)
				return err
			}
			if err := lifecycle.WriteNewFile(output, []byte(text), 0o644, force, ""); err != nil {
				return fmt.Errorf("write sample: %w", err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s; check it with: kubexm config validate -f %s\n", output, output)
			return nil
		},
	}
	cmd.Flags().StringVar(&version, "kubernetes-version", schema.DefaultKubernetesVersion, "Kubernetes version: a patch of a minor kubexm support lists, or the minor alone (its newest checked patch)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output file (default: standard output)")
	cmd.Flags().StringVar(&name, "name", "mycluster", "cluster name")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite an existing output file")
	return cmd
}
