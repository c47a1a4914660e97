package lifecycle

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/engine/model"
	"github.com/mensylisir/kubexm/engine/output"
)

// The work directory follows the cluster's name, else the inventory file's.
func TestDefaultWorkDir(t *testing.T) {
	for _, c := range []struct{ name, inv, want string }{
		{"prod", "clusters/a.yaml", filepath.Join(".kubexm", "prod")},
		{"", "clusters/hosts.ini", filepath.Join(".kubexm", "hosts")},
	} {
		if got := DefaultWorkDir(c.name, c.inv); got != c.want {
			t.Errorf("DefaultWorkDir(%q, %q) = %q, want %q", c.name, c.inv, got, c.want)
		}
	}
}

// An output format the run cannot write is refused before anything loads.
func TestRunRefusesOutput(t *testing.T) {
	var out bytes.Buffer
	rc, err := Runner{}.Run(context.Background(), Request{Playbook: "create-cluster", Output: "yaml", Stdout: &out})
	if rc != nil || err == nil || !strings.Contains(err.Error(), `--output must be text or json, not "yaml"`) || out.Len() != 0 {
		t.Errorf("Run -o yaml: %v, %v, %q", rc, err, out.String())
	}
}

// An export whose bundle cannot be written is refused before the playbook
// fetches anything.
func TestExportRefusesMissingDir(t *testing.T) {
	var out bytes.Buffer
	missing := filepath.Join(t.TempDir(), "no", "bundle.tar.gz")
	e, err := Runner{}.Export(context.Background(), ExportRequest{Output: missing, Run: Request{Playbook: ExportPlaybook, Output: "text", Stdout: &out}})
	if e != nil || err == nil || !strings.Contains(err.Error(), "does not exist") || out.Len() != 0 {
		t.Errorf("Export to %s: %v, %v, %q", missing, e, err, out.String())
	}
}

// The view of a run is the request's own sink, the JSON events or the
// text, the Runner's when it has one.
func TestRunnerSink(t *testing.T) {
	var b bytes.Buffer
	own := output.NewJSON(&b)
	if s, stop := (Runner{}).Sink(&b, Request{Sink: own, Output: "text"}); s != own {
		t.Errorf("the request's sink was not used: %T", s)
	} else {
		stop()
	}
	s, _ := (Runner{}).Sink(&b, Request{Output: "json"})
	if _, ok := s.(*output.JSON); !ok {
		t.Errorf("-o json: %T", s)
	}
	s, _ = (Runner{}).Sink(&b, Request{Output: "text"})
	if _, ok := s.(*output.Text); !ok {
		t.Errorf("-o text without a TextSink: %T", s)
	}
	stopped := false
	r := Runner{TextSink: func(io.Writer, int) (model.Sink, func()) { return own, func() { stopped = true } }}
	s, stop := r.Sink(&b, Request{Output: "text"})
	stop()
	if s != own || !stopped {
		t.Errorf("-o text with a TextSink: %T, stopped %v", s, stopped)
	}
}

// Local plays as Run does: its refusals are Run's.
func TestLocalPlay(t *testing.T) {
	var out bytes.Buffer
	err := Local{}.Play(context.Background(), Request{Playbook: "create-cluster", Output: "yaml", Stdout: &out})
	if err == nil || !strings.Contains(err.Error(), `--output must be text or json, not "yaml"`) {
		t.Errorf("Play -o yaml: %v", err)
	}
}
