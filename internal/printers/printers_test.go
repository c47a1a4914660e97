package printers

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/internal/cmdtree"
)

type item struct {
	Name string `json:"name"`
	N    int    `json:"count,omitempty"`
}

func TestCheck(t *testing.T) {
	for _, ok := range []string{"json", "yaml", "text", "markdown"} {
		if err := Check(ok, "text", "markdown"); err != nil {
			t.Errorf("Check(%q): %v", ok, err)
		}
	}
	err := Check("wide", "text")
	var usage *cmdtree.UsageError
	if !errors.As(err, &usage) || err.Error() != `--output must be text, json or yaml, not "wide"` {
		t.Errorf("Check(wide) = %v", err)
	}
	if err := Check("text"); err == nil {
		t.Error("Check(text) with no human format passed")
	}
	if err := OneOf("yaml", "text", "json"); err == nil || err.Error() != `--output must be text or json, not "yaml"` {
		t.Errorf("OneOf(yaml, text, json) = %v", err)
	}
}

// json and yaml are one document: the JSON field names.
func TestWrite(t *testing.T) {
	for format, want := range map[string]string{
		"json": "{\n  \"name\": \"a\",\n  \"count\": 2\n}\n",
		"yaml": "name: a\ncount: 2\n",
	} {
		var b strings.Builder
		if err := Write(&b, format, item{Name: "a", N: 2}); err != nil || b.String() != want {
			t.Errorf("Write(%s) = %q, %v; want %q", format, b.String(), err, want)
		}
	}
}

// A list is a JSON object per line, or YAML documents.
func TestWriteItems(t *testing.T) {
	items := []item{{Name: "a"}, {Name: "b", N: 1}}
	for format, want := range map[string]string{
		"json": "{\"name\":\"a\"}\n{\"name\":\"b\",\"count\":1}\n",
		"yaml": "---\nname: a\n---\nname: b\ncount: 1\n",
	} {
		var b strings.Builder
		if err := WriteItems(&b, format, items); err != nil || b.String() != want {
			t.Errorf("WriteItems(%s) = %q, %v; want %q", format, b.String(), err, want)
		}
	}
}

// Print leaves the human formats to the command's text.
func TestPrint(t *testing.T) {
	text := func(w io.Writer) error { _, err := io.WriteString(w, "A\n"); return err }
	for format, want := range map[string]string{"text": "A\n", "markdown": "A\n", "json": "{\n  \"name\": \"a\"\n}\n"} {
		var b strings.Builder
		if err := Print(&b, format, item{Name: "a"}, text); err != nil || b.String() != want {
			t.Errorf("Print(%s) = %q, %v; want %q", format, b.String(), err, want)
		}
	}
}

// PrintItems writes lists for programs as WriteItems does, and leaves the
// human formats to the command's text.
func TestPrintItems(t *testing.T) {
	text := func(w io.Writer) error { _, err := io.WriteString(w, "A\n"); return err }
	items := []item{{Name: "a"}, {Name: "b"}}
	for format, want := range map[string]string{"text": "A\n", "json": "{\"name\":\"a\"}\n{\"name\":\"b\"}\n", "yaml": "---\nname: a\n---\nname: b\n"} {
		var b strings.Builder
		if err := PrintItems(&b, format, items, text); err != nil || b.String() != want {
			t.Errorf("PrintItems(%s) = %q, %v; want %q", format, b.String(), err, want)
		}
	}
}
