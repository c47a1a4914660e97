package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/clusterview"
	"github.com/mensylisir/kubexm/service/api"
)

// `kubexm bundle list` and `kubexm bundle delete` reach the offline
// bundles uploaded to a kubexm server (a verb's --offline-bundle with
// --server uploads one): they stay in the cluster's work directory there,
// hundreds of MiB each, until deleted.

func newBundleCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bundle",
		Short: "List and delete the offline bundles uploaded to a kubexm server",
	}
	cmd.AddCommand(newBundleListCmd(), newBundleDeleteCmd())
	return cmd
}

func newBundleListCmd() *cobra.Command {
	return clusterListCmd("list --server URL --cluster NAME", "List the offline bundles uploaded to a kubexm server for a cluster, newest first",
		"bundles", "no offline bundles of cluster %[1]s on %[2]s (a verb with --offline-bundle FILE --server %[2]s uploads one)",
		"SHA256\tSIZE\tAGE", func(b api.Bundle) string {
			return fmt.Sprintf("%s\t%d MiB\t%s", b.SHA256, b.Size>>20, clusterview.Age(b.UploadedAt))
		})
}

func newBundleDeleteCmd() *cobra.Command {
	var f clientFlags
	var cluster string
	cmd := &cobra.Command{
		Use:   "delete SHA256 --server URL --cluster NAME",
		Short: "Delete an offline bundle uploaded to a kubexm server, unless a job uses it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClusterClient(&f, cluster)
			if err != nil {
				return err
			}
			deleted, err := c.DeleteBundle(cmd.Context(), cluster, args[0])
			if err != nil {
				return err
			}
			if f.output != "text" {
				return printDoc(cmd.OutOrStdout(), f.output, map[string]string{"cluster": cluster, "deleted": deleted})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted offline bundle %s of cluster %s on %s\n", deleted, cluster, c.Base.Redacted())
			return nil
		},
	}
	addClientFlags(cmd, &f)
	cmd.Flags().StringVar(&cluster, "cluster", "", "the registered cluster (required)")
	return cmd
}
