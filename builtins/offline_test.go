package builtins

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/builtins/onhost"
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

func TestDownloadOfflineRefusesChecksumsURLs(t *testing.T) {
	env, root := steptest.Env(t)
	steptest.MustWrite(t, filepath.Join(root, "f"), "x")
	steptest.MustWrite(t, filepath.Join(root, "SUMS"), onhost.SHA256Hex([]byte("x"))+"  f\n")
	off := Offline(map[string]step.Builtin{"download": registered(t, "download")})["download"]
	_, err := steptest.RunBuiltin(t.Context(), env, off, step.Args{"src": filepath.Join(root, "f"), "checksums": []any{"http://mirror.invalid/SUMS"}, "dest": "a/"})
	if err == nil || !strings.Contains(err.Error(), "--offline-bundle: refusing to download from http://mirror.invalid/SUMS") {
		t.Errorf("got %v", err)
	}
	res, err := steptest.RunBuiltin(t.Context(), env, off, step.Args{"src": filepath.Join(root, "f"), "checksums": []any{filepath.Join(root, "SUMS")}, "dest": "a/"})
	if err != nil || !res.Changed {
		t.Errorf("a bundle's own checksums: %+v %v", res, err)
	}
}

// registered is All's builtin called name.
func registered(t *testing.T, name string) step.Builtin {
	t.Helper()
	for _, b := range All() {
		if b.Spec().Name == name {
			return b
		}
	}
	t.Fatalf("no builtin %s", name)
	return nil
}
