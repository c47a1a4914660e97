package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/clusterview"
	"github.com/mensylisir/kubexm/service/api"
	"github.com/mensylisir/kubexm/service/client"
)

// `kubexm backup list` and `kubexm backup download` reach the backups a
// kubexm server made (backup cluster --server): they stay in the
// cluster's work directory there, where restore cluster --server finds
// them by name.

func newBackupListCmd() *cobra.Command {
	return clusterListCmd("list --server URL --cluster NAME", "List the backups a kubexm server made of a cluster",
		"backups", "no backups of cluster %[1]s on %[2]s (kubexm backup cluster -f cluster.yaml --server %[2]s makes one)",
		"NAME\tSIZE\tAGE\tSHA256", func(b api.Backup) string {
			return fmt.Sprintf("%s\t%d MiB\t%s\t%s", b.Name, b.Size>>20, clusterview.Age(b.CreatedAt), orDash(b.SHA256))
		})
}

// clusterListCmd is a `NOUN list --server URL --cluster NAME` command:
// it shows the items of GET /api/v1/clusters/NAME/ROUTE (the answer's
// key ROUTE) as JSON or as a table of header and a row per item; none
// prints empty, a format given the cluster and the server.
func clusterListCmd[T any](use, short, route, empty, header string, row func(T) string) *cobra.Command {
	var f clientFlags
	var cluster string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClusterClient(&f, cluster)
			if err != nil {
				return err
			}
			items, err := client.ClusterItems[T](cmd.Context(), c, cluster, route)
			if err != nil {
				return err
			}
			if f.output != "text" {
				return printDoc(cmd.OutOrStdout(), f.output, items)
			}
			if len(items) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), empty+"\n", cluster, c.Base.Redacted())
				return nil
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, header)
			for _, it := range items {
				fmt.Fprintln(tw, row(it))
			}
			return tw.Flush()
		},
	}
	addClientFlags(cmd, &f)
	cmd.Flags().StringVar(&cluster, "cluster", "", "the registered cluster (required)")
	return cmd
}

// newClusterClient is the client of a server verb about one registered
// cluster: --cluster is required.
func newClusterClient(f *clientFlags, cluster string) (*apiClient, error) {
	if cluster == "" {
		return nil, errors.New("--cluster is required: the registered cluster's name (kubexm get clusters --server URL lists them)")
	}
	return newAPIClient(f)
}

func newBackupDownloadCmd() *cobra.Command {
	var f clientFlags
	var cluster, to string
	cmd := &cobra.Command{
		Use:   "download NAME --server URL --cluster NAME [--to FILE]",
		Short: "Download a backup a kubexm server made, checking its size and sha256",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClusterClient(&f, cluster)
			if err != nil {
				return err
			}
			name := args[0]
			if to == "" {
				to = filepath.Base(name)
			}
			if _, err := os.Lstat(to); err == nil {
				return fmt.Errorf("%s exists: remove it or give another --to", to)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			start := time.Now()
			n, sum, err := c.DownloadBackup(cmd.Context(), cluster, name, to)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "backup %s of cluster %s: %d bytes, sha256 %s, written to %s in %s\n", name, cluster, n, sum, to, time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	addClientFlags(cmd, &f)
	cmd.Flags().StringVar(&cluster, "cluster", "", "the registered cluster (required)")
	cmd.Flags().StringVar(&to, "to", "", "the file to write (default: NAME in this directory)")
	return cmd
}
