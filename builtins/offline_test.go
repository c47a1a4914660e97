package builtins

import (
	"context"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/engine/step"
)

// countingBuiltin records that it ran.
type countingBuiltin struct {
	name string
	ran  *int
}

func (c countingBuiltin) Spec() step.Spec { return step.Spec{Name: c.name} }

func (c countingBuiltin) Run(context.Context, *step.Env, step.Args) (step.Result, error) {
	*c.ran++
	return step.Result{}, nil
}

// Offline refuses what would reach the network, lets a download without
// URLs (a local copy) through, and leaves the registry it was given alone.
func TestOffline(t *testing.T) {
	var ran int
	reg := map[string]step.Builtin{
		"download":   countingBuiltin{"download", &ran},
		"image_save": countingBuiltin{"image_save", &ran},
		"command":    countingBuiltin{"command", &ran},
	}
	off := Offline(reg)
	if _, guarded := reg["download"].(offlineGuard); guarded {
		t.Fatal("Offline changed the registry it was given")
	}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		args step.Args
		want string // "" for allowed
	}{
		{"download", step.Args{"url": "https://dl.example/kubelet", "dest": "kubelet"}, "refusing to download from https://dl.example/kubelet to kubelet"},
		{"download", step.Args{"urls": []any{"https://a.example/x", "https://b.example/x"}, "dest": "x"}, "download from https://a.example/x, https://b.example/x"},
		{"download", step.Args{"src": "/srv/bundle/x", "dest": "x"}, ""},
		{"image_save", step.Args{"ref": "registry.k8s.io/pause:3.10"}, "refusing to pull registry.k8s.io/pause:3.10 from its registry"},
		{"command", step.Args{"cmd": "true"}, ""},
	} {
		before := ran
		_, err := off[c.name].Run(ctx, &step.Env{}, c.args)
		switch {
		case c.want == "" && (err != nil || ran != before+1):
			t.Errorf("%s %v: refused or not run: %v", c.name, c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || ran != before):
			t.Errorf("%s %v: %v, want an error saying %q and no run", c.name, c.args, err, c.want)
		}
	}
}
