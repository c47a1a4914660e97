// Package taskfiles gives a task's builtin the files and templates it
// names: found in the task's role (an overlay's file first), beside a hook
// play, beside the playbook; a file embedded in the binary copied to disk
// once per run, since builtins read paths; a role's template rendered with
// the blocks its overlay files replace. It knows the model of a playbook
// and the evaluator, nothing of the run.
package taskfiles

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/mensylisir/kubexm/engine/eval"
	"github.com/mensylisir/kubexm/engine/playbook"
)

// Files are a run's files of tasks: what it copied out of the binary, and
// where.
type Files struct {
	pb *playbook.Playbook
	ev *eval.Evaluator

	mu     sync.Mutex
	copied map[string]string // embedded file name -> its copy on disk
	dir    string
}

// New returns the files of pb's tasks, templates rendered by ev.
func New(pb *playbook.Playbook, ev *eval.Evaluator) *Files {
	return &Files{pb: pb, ev: ev, copied: map[string]string{}}
}

// Find resolves a builtin's relative files/ or templates/ name for task t
// (step.Env.FindFile).
func (f *Files) Find(t *playbook.Task) func(kind, name string) (string, error) {
	return func(kind, name string) (string, error) {
		if filepath.IsAbs(name) {
			return name, nil
		}
		var cands []playbook.Source
		if t.Role != nil {
			if o, _, ok := f.pb.OverlayFile(t.Role, kind, name); ok {
				cands = append(cands, o)
			}
			cands = append(cands, t.Role.Dir.Join(kind).Join(name), t.Role.Dir.Join(name))
		}
		pbDir := f.pb.Src.Dir()
		// A hook play's own files are beside it.
		if t.Play != nil && t.Play.Src.Fsys != nil && !t.Play.Src.Dir().Same(pbDir) {
			d := t.Play.Src.Dir()
			cands = append(cands, d.Join(kind).Join(name), d.Join(name))
		}
		cands = append(cands, pbDir.Join(kind).Join(name), pbDir.Join(name))
		for _, c := range cands {
			if c.IsFile() {
				return f.materialize(c)
			}
		}
		where := pbDir.String()
		if t.Role != nil {
			where = "role " + t.Role.Name + " and " + where
		}
		return "", fmt.Errorf("%s %q not found in %s", strings.TrimSuffix(kind, "s"), name, where)
	}
}

// RenderTemplate renders a template of t's role with the blocks its
// overlay files of blocks replace (step.Env.RenderTemplate).
func (f *Files) RenderTemplate(t *playbook.Task) func(name, text string, vars map[string]any) (string, error) {
	return func(name, text string, vars map[string]any) (string, error) {
		var files []eval.BlockFile
		if t.Role != nil && !filepath.IsAbs(name) {
			_, blocks, _ := f.pb.OverlayFile(t.Role, "templates", name)
			for _, b := range blocks {
				data, err := b.Read()
				if err != nil {
					return "", err
				}
				files = append(files, eval.BlockFile{File: b.String(), Text: string(data)})
			}
		}
		return f.ev.RenderBlocks(text, files, vars)
	}
}

// materialize returns a path on disk for a file, copying embedded files out
// once per run.
func (f *Files) materialize(s playbook.Source) (string, error) {
	if !s.Builtin {
		return "/" + s.Name, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.copied[s.Name]; ok {
		return p, nil
	}
	if f.dir == "" {
		d, err := os.MkdirTemp("", "kubexm-builtin-")
		if err != nil {
			return "", err
		}
		f.dir = d
	}
	data, err := s.Read()
	if err != nil {
		return "", err
	}
	p := filepath.Join(f.dir, filepath.FromSlash(s.Name))
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		return "", err
	}
	f.copied[s.Name] = p
	return p, nil
}

// Remove removes the copies of embedded files, at the end of the run.
func (f *Files) Remove() {
	if f.dir != "" {
		_ = os.RemoveAll(f.dir)
	}
}
