package eval

import (
	"strings"
	"testing"
)

const blocksBase = `head {{ .x }}
{{ block "listen" . }}listen {{ .port }}{{ end }}
{{- $cfg := include "cfg" . | fromYaml }}
{{ define "cfg" }}{a: 1, b: {{ .x }}}{{ end }}
cfg {{ $cfg.a }} {{ $cfg.b }}
tail`

func TestRenderBlocksReplacesOneBlock(t *testing.T) {
	e := New()
	vars := map[string]any{"x": "X", "port": 6443}
	plain, err := e.RenderBlocks(blocksBase, nil, vars)
	if err != nil {
		t.Fatal(err)
	}
	if want := "head X\nlisten 6443\n\ncfg 1 X\ntail"; plain != want {
		t.Fatalf("without blocks: %q, want %q", plain, want)
	}
	site := BlockFile{File: "site/roles/lb/templates/lb.cfg.tmpl", Text: "{{/* the site's */}}\n{{ define \"listen\" }}listen {{ .port }} proxy{{ end }}\n"}
	dc := BlockFile{File: "dc1/roles/lb/templates/lb.cfg.tmpl", Text: `{{ define "cfg" }}{a: 2, b: dc}{{ end }}`}
	out, err := e.RenderBlocks(blocksBase, []BlockFile{site, dc}, vars)
	if err != nil {
		t.Fatal(err)
	}
	if want := "head X\nlisten 6443 proxy\n\ncfg 2 dc\ntail"; out != want {
		t.Errorf("with blocks: %q, want %q", out, want)
	}
	// The later file wins over the earlier for the same block, and the
	// template as parsed (cached) keeps its own blocks.
	again, err := e.RenderBlocks(blocksBase, []BlockFile{site, {File: "dc1", Text: `{{ define "listen" }}dc1{{ end }}`}}, vars)
	if err != nil || !strings.Contains(again, "\ndc1\n") {
		t.Errorf("the last file's block: %q, %v", again, err)
	}
	if plain2, _ := e.RenderBlocks(blocksBase, nil, vars); plain2 != plain {
		t.Errorf("the cached template changed: %q", plain2)
	}
}

func TestRenderBlocksErrors(t *testing.T) {
	e := New()
	vars := map[string]any{"x": "X", "port": 1}
	for _, c := range []struct {
		file BlockFile
		want []string
	}{
		{BlockFile{File: "o/t.tmpl", Text: "\n\n{{ define \"lisen\" }}x{{ end }}"},
			[]string{`o/t.tmpl:3: block "lisen" is not in the template`, "its blocks are listen, cfg"}},
		{BlockFile{File: "o/t.tmpl", Text: "text of its own\n{{ define \"listen\" }}x{{ end }}"},
			[]string{"o/t.tmpl: a file of blocks holds only"}},
		{BlockFile{File: "o/t.tmpl", Text: `{{ define "listen" }}{{ template "cfg" . }}{{ end }}{{ define "cfg" }}{{ include "listen" . }}{{ end }}`},
			[]string{"calls itself"}},
	} {
		_, err := e.RenderBlocks(blocksBase, []BlockFile{c.file}, vars)
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%q: got %v, want %q", c.file.Text, err, w)
			}
		}
	}
}

func TestInclude(t *testing.T) {
	e := New()
	out, err := e.RenderString(`{{ define "n" }}{{ .a }}-{{ .a }}{{ end }}{{ include "n" . | upper }}`, map[string]any{"a": "x"})
	if err != nil || out != "X-X" {
		t.Errorf("include: %q, %v", out, err)
	}
	if _, err := e.RenderString(`{{ define "n" }}{{ include "n" . }}{{ end }}{{ include "n" . }}`, nil); err == nil || !strings.Contains(err.Error(), "calls itself") {
		t.Errorf("an include of itself: %v", err)
	}
	if _, err := e.RenderString(`{{ define "n" }}x{{ end }}{{ include .name . }}`, map[string]any{"name": "n"}); err == nil || !strings.Contains(err.Error(), "string in quotes") {
		t.Errorf("an include of a computed name: %v", err)
	}
}

func TestTemplateBlocks(t *testing.T) {
	blocks, only, err := TemplateBlocks(blocksBase)
	if err != nil || only || BlockNames(blocks) != "its blocks are listen, cfg" || blocks[0].Line != 2 || blocks[1].Line != 4 {
		t.Errorf("the base: %v %v %v", blocks, only, err)
	}
	blocks, only, err = TemplateBlocks("{{/* c */}}\n{{- define \"cfg\" }}{{ unknownFunc }}{{ end }}\n")
	if err != nil || !only || len(blocks) != 1 || blocks[0].Line != 2 {
		t.Errorf("a file of blocks: %v %v %v", blocks, only, err)
	}
	if _, only, _ := TemplateBlocks("plain text"); only {
		t.Error("a template without blocks is not a file of blocks")
	}
}
