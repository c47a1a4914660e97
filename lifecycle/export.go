package lifecycle

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

	"github.com/mensylisir/kubexm/bundle"
	"github.com/mensylisir/kubexm/engine/transport"
)

// ExportPlaybook fetches what a cluster needs and writes the list of it;
// it holds all the knowledge of which files those are.
const ExportPlaybook = "artifact-export"

// ExportRequest is `kubexm artifact export`: the run of the playbook that
// fetches the artifacts (Run.Playbook, ExportPlaybook or a fork of it) and
// the bundle to write.
type ExportRequest struct {
	Run    Request
	Output string
}

// Exported is the bundle an export wrote.
type Exported struct {
	Manifest bundle.Manifest
	// SHA256 is the bundle file's digest, Size its size in bytes.
	SHA256 string
	Size   int64
	// Packing is how long packing took, Total the whole export.
	Packing, Total time.Duration
}

// Export runs req's playbook, which fetches the artifacts the cluster needs
// into the work directory and lists them, and packs the listed files into
// the bundle req.Output.
func (r Runner) Export(ctx context.Context, req ExportRequest) (*Exported, error) {
	start := time.Now()
	out, err := filepath.Abs(req.Output)
	if err != nil {
		return nil, err
	}
	if err := bundle.CheckName(req.Output); err != nil {
		return nil, fmt.Errorf("-o %w", err)
	}
	if st, err := os.Stat(filepath.Dir(out)); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("-o %s: the directory %s does not exist", req.Output, filepath.Dir(out))
	}
	tmp, err := os.MkdirTemp("", "kubexm-export-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	listFile := filepath.Join(tmp, "artifacts.json")
	setList, err := json.Marshal(map[string]string{"artifacts_list_file": listFile})
	if err != nil {
		return nil, err
	}
	// The list variable goes last so that it wins.
	run := req.Run
	run.ExtraVars = append(append([]string{}, run.ExtraVars...), string(setList))
	if _, err := r.Run(ctx, run); err != nil {
		return nil, fmt.Errorf("fetching the artifacts: %w", err)
	}
	data, err := os.ReadFile(listFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("playbook %s wrote no artifact list (artifacts_list_file); nothing to pack", run.Playbook)
	} else if err != nil {
		return nil, err
	}
	list, in, err := bundle.ParseList(data)
	if err != nil {
		return nil, fmt.Errorf("the artifact list of playbook %s: %w", run.Playbook, err)
	}
	packStart := time.Now()
	m, sum, err := bundle.Pack(ctx, out, bundle.Manifest{
		Cluster:       list.Cluster,
		KubexmVersion: r.Version,
		Created:       time.Now().UTC().Truncate(time.Second),
	}, in, transport.WorkDirSums(list.WorkDir))
	if err != nil {
		return nil, fmt.Errorf("packing %s: %w", req.Output, err)
	}
	st, err := os.Stat(out)
	if err != nil {
		return nil, err
	}
	return &Exported{Manifest: m, SHA256: sum, Size: st.Size(), Packing: time.Since(packStart), Total: time.Since(start)}, nil
}

// Write prints what the export packed, and how to install from it with
// the cluster file inventory.
func (e *Exported) Write(w io.Writer, output, inventory string) {
	var total int64
	kinds := map[string]int{}
	for _, art := range e.Manifest.Artifacts {
		total += art.Size
		kinds[art.Kind]++
	}
	var parts []string
	for _, k := range bundle.Kinds() {
		if n := kinds[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, plural(k, n)))
		}
	}
	fmt.Fprintf(w, "\nwrote %s: %d files (%s) for cluster %s, %d MiB packed from %d MiB, sha256 %s (packed in %s, %s in all)\n",
		output, len(e.Manifest.Artifacts), strings.Join(parts, ", "), e.Manifest.Cluster, e.Size>>20, total>>20, e.SHA256,
		e.Packing.Round(time.Millisecond), e.Total.Round(time.Millisecond))
	fmt.Fprintf(w, "install with: kubexm play create-cluster -i %s --offline-bundle %s\n", inventory, output)
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
