package yamlguard

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestDeepAndWideInputsRefusedFast(t *testing.T) {
	for name, data := range map[string]string{
		"block sequences on one line": strings.Repeat("- ", 20000) + "x\n",
		"flow sequences":              strings.Repeat("[", 20000) + strings.Repeat("]", 20000),
		"flow mappings":               strings.Repeat("{a: ", 20000) + strings.Repeat("}", 20000),
		"indentation":                 deepIndent(200),
		"aliases":                     "a: &a x\nb: [" + strings.Repeat("*a, ", 20000) + "*a]\n",
	} {
		start := time.Now()
		err := Check([]byte(data), Default())
		var ge *Error
		if !errors.As(err, &ge) {
			t.Errorf("%s: accepted (%v)", name, err)
			continue
		}
		// Unbounded, these took seconds to minutes; a second leaves room
		// for a loaded machine.
		if el := time.Since(start); el > time.Second {
			t.Errorf("%s: took %s", name, el)
		}
	}
	if err := Check(make([]byte, 17<<20), Default()); err == nil {
		t.Error("17 MiB accepted")
	}
}

func deepIndent(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(strings.Repeat(" ", i) + "k:\n")
	}
	return b.String()
}

func TestOrdinaryYAMLAccepted(t *testing.T) {
	for _, y := range []string{
		"a: 1\nb: [1, [2, {c: d}]]\n",
		"key: it's [not] {a} flow\n",
		"s: \"[[[[[[\" # [[[[\n",
		"t: '[[[['' [[['\n",
		"script: |\n" + deepIndentText(150) + "next: 1\n",
		"- &a {x: 1}\n- *a\n- <<: *a\n",
	} {
		if err := Check([]byte(y), Limits{MaxDepth: 10, MaxAliases: 5}); err != nil {
			t.Errorf("%q refused: %v", y, err)
		}
	}
}

func deepIndentText(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(strings.Repeat(" ", i+2) + "[{\n")
	}
	return b.String()
}

// Every YAML file of the repository is far below the limits.
func TestRepositoryFilesAccepted(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	n := 0
	for _, dir := range []string{"roles", "playbooks", "schema/testdata", "engine/testdata"} {
		filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !(strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			n++
			if err := Check(data, Limits{MaxDepth: Default().MaxDepth / 4}); err != nil {
				t.Errorf("%s: %v", p, err)
			}
			return nil
		})
	}
	if n < 20 {
		t.Fatalf("only %d files found", n)
	}
}
