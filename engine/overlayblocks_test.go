package engine

import (
	"context"
	"strings"
	"testing"
)

// TestOverlayBlocks: an overlay template holding only {{ define }} blocks
// replaces those blocks of the role's template and keeps the rest; a later
// overlay's block wins; a whole-file overlay below them is their base.
func TestOverlayBlocks(t *testing.T) {
	t.Chdir(t.TempDir())
	b := overlayBuiltin()
	b["roles/kube/node/templates/config.toml.tmpl"].Data = []byte(`listen {{ block "listen" . }}6443{{ end }}
mirrors {{ block "mirrors" . }}none{{ end }}`)
	log, _ := loadRun(t, "demo", b, LoadOptions{})
	if got := strings.Join(log, " "); !strings.Contains(got, "readfile=listen 6443\nmirrors none ") {
		t.Fatalf("without overlay: %q", got)
	}
	site := writeFiles(t, map[string]string{"roles/kube/node/templates/config.toml.tmpl": "{{/* the site's mirror */}}\n{{ define \"mirrors\" }}mirror.site.example{{ end }}\n"})
	log, _ = loadRun(t, "demo", b, LoadOptions{Overlays: []string{site}})
	if got := strings.Join(log, " "); !strings.Contains(got, "readfile=listen 6443\nmirrors mirror.site.example ") {
		t.Errorf("one block replaced: %q", got)
	}
	dc := writeFiles(t, map[string]string{"roles/kube/node/templates/config.toml.tmpl": `{{ define "mirrors" }}mirror.dc1{{ end }}{{ define "listen" }}8443{{ end }}`})
	log, _ = loadRun(t, "demo", b, LoadOptions{Overlays: []string{site, dc}})
	if got := strings.Join(log, " "); !strings.Contains(got, "readfile=listen 8443\nmirrors mirror.dc1 ") {
		t.Errorf("the later overlay's blocks: %q", got)
	}
	whole := writeFiles(t, map[string]string{"roles/kube/node/templates/config.toml.tmpl": `own {{ block "mirrors" . }}-{{ end }}`})
	log, _ = loadRun(t, "demo", b, LoadOptions{Overlays: []string{whole, site}})
	if got := strings.Join(log, " "); !strings.Contains(got, "readfile=own mirror.site.example ") {
		t.Errorf("blocks over a whole-file overlay: %q", got)
	}
}

// TestOverlayBlocksUnknown: a block the role's template does not have is
// refused at load, naming the overlay file and line and the template's
// blocks.
func TestOverlayBlocksUnknown(t *testing.T) {
	t.Chdir(t.TempDir())
	b := overlayBuiltin()
	b["roles/kube/node/templates/config.toml.tmpl"].Data = []byte(`{{ block "listen" . }}6443{{ end }} {{ block "mirrors" . }}none{{ end }}`)
	o := writeFiles(t, map[string]string{"roles/kube/node/templates/config.toml.tmpl": "{{/* a typo */}}\n{{ define \"mirors\" }}x{{ end }}\n"})
	_, err := Load(context.Background(), "demo", LoadOptions{Builtins: testRegistry(&calls{}), BuiltinFS: b, Overlays: []string{o}})
	for _, w := range []string{"config.toml.tmpl:2: block \"mirors\" is not in role kube/node's template", `did you mean "mirrors"?`, "its blocks are listen, mirrors"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v lacks %q", err, w)
		}
	}
}
