package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/bundle"
)

// exportPlaybook fetches what a cluster needs and writes the list of it;
// it holds all the knowledge of which files those are.
const exportPlaybook = "artifact-export"

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
		Long: `Run the artifact-export playbook for the cluster (it fetches the release
files and images the configuration needs into the work directory, for every
architecture of its hosts, with their sha256 checked), then pack them into a
.tar.gz with a manifest.json and a SHA256SUMS in every directory. Install
from it on machines without internet access with
  kubexm play create-cluster -i cluster.yaml --offline-bundle bundle.tar.gz
Sources can be changed as for the installation (-e etcd_mirrors=...,
-e kubernetes_local_dir=..., -e images_local_dir=...); see docs/guide.md.`,
		Example: `  kubexm artifact export -f cluster.yaml -o bundle.tar.gz
  kubexm artifact export -f cluster.yaml -o bundle.tar.gz -e images_local_dir=/srv/images`,
		Args: cobra.NoArgs,
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
	fl.StringVar(&f.playbook, "playbook", exportPlaybook, "the playbook that fetches the artifacts (a fork of artifact-export)")
	cmd.AddCommand(export, newArtifactImagesCmd())
	return cmd
}

func (a *app) exportBundle(ctx context.Context, w io.Writer, f exportFlags) error {
	start := time.Now()
	out, err := filepath.Abs(f.output)
	if err != nil {
		return err
	}
	if st, err := os.Stat(filepath.Dir(out)); err != nil || !st.IsDir() {
		return fmt.Errorf("-o %s: the directory %s does not exist", f.output, filepath.Dir(out))
	}
	tmp, err := os.MkdirTemp("", "kubexm-export-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	listFile := filepath.Join(tmp, "artifacts.json")
	setList, err := json.Marshal(map[string]string{"artifacts_list_file": listFile})
	if err != nil {
		return err
	}
	// The export runs as `kubexm play` would run it; the list variable goes
	// last so that it wins.
	pf := playFlags{
		Inventory: f.file,
		ExtraVars: append(append([]string{}, f.extraVars...), string(setList)),
		Forks:     50,
		Output:    "text",
		Verbose:   f.verbose,
		RolesPath: f.rolesPath,
		WorkDir:   f.workDir,
	}
	if err := a.play(ctx, w, f.playbook, pf); err != nil {
		return fmt.Errorf("fetching the artifacts: %w", err)
	}
	data, err := os.ReadFile(listFile)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("playbook %s wrote no artifact list (artifacts_list_file); nothing to pack", f.playbook)
	} else if err != nil {
		return err
	}
	list, in, err := bundle.ParseList(data)
	if err != nil {
		return fmt.Errorf("the artifact list of playbook %s: %w", f.playbook, err)
	}
	packStart := time.Now()
	m, sum, err := bundle.Pack(ctx, out, bundle.Manifest{
		Cluster:       list.Cluster,
		KubexmVersion: version,
		Created:       time.Now().UTC().Truncate(time.Second),
	}, in)
	if err != nil {
		return fmt.Errorf("packing %s: %w", f.output, err)
	}
	st, err := os.Stat(out)
	if err != nil {
		return err
	}
	var total int64
	kinds := map[string]int{}
	for _, art := range m.Artifacts {
		total += art.Size
		kinds[art.Kind]++
	}
	fmt.Fprintf(w, "\nwrote %s: %d files (%s) for cluster %s, %d MiB packed from %d MiB, sha256 %s (packed in %s, %s in all)\n",
		f.output, len(m.Artifacts), kindSummary(kinds), m.Cluster, st.Size()>>20, total>>20, sum,
		time.Since(packStart).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
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
