package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/mensylisir/kubexm/engine/eval"
)

var ev = eval.New()
var condKeys = map[string]bool{"when": true, "changed_when": true, "failed_when": true, "until": true, "that": true}

func walk(file string, v any, key string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			walk(file, e, k)
		}
	case []any:
		for _, e := range x {
			walk(file, e, key)
		}
	case string:
		if condKeys[key] {
			if err := ev.CheckExpr(x); err != nil {
				fmt.Printf("%s: %s: expr %q: %v\n", file, key, x, err)
			}
		} else if err := ev.CheckTemplate(x); err != nil {
			fmt.Printf("%s: %s: template: %v\n", file, key, err)
		}
	}
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "run" {
		runMain(os.Args[1:])
		return
	}
	files, _ := filepath.Glob("roles/*/*/*.yaml")
	more, _ := filepath.Glob("playbooks/*/playbook.yaml")
	files = append(files, more...)
	tmpls, _ := filepath.Glob("roles/*/templates/*")
	for _, f := range files {
		b, _ := os.ReadFile(f)
		var v any
		if err := yaml.Unmarshal(b, &v); err != nil {
			fmt.Println(f, err)
			continue
		}
		walk(f, v, "")
	}
	for _, f := range tmpls {
		b, _ := os.ReadFile(f)
		if err := ev.CheckTemplate(string(b)); err != nil {
			fmt.Println(f, err)
		}
	}
	load()
	if len(os.Args) > 1 {
		render()
		exprs()
	}
	_ = strings.TrimSpace
}
