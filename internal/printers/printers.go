// Package printers is kubexm's -o: a command prints for people in a
// format of its own (text, markdown) and for programs as json or yaml,
// the same document in both, as kubectl's printers do.
package printers

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm/internal/cmdtree"
)

// Check refuses an -o other than the human ones, json and yaml.
func Check(output string, human ...string) error {
	return OneOf(output, append(slices.Clone(human), "json", "yaml")...)
}

// OneOf refuses an -o other than those allowed (a command printing events
// as they come has no yaml).
func OneOf(output string, allowed ...string) error {
	if slices.Contains(allowed, output) {
		return nil
	}
	n := len(allowed) - 1
	return &cmdtree.UsageError{Msg: fmt.Sprintf("--output must be %s or %s, not %q", strings.Join(allowed[:n], ", "), allowed[n], output)}
}

// Structured reports whether format is one for programs (json, yaml).
func Structured(format string) bool { return format == "json" || format == "yaml" }

// Print prints v as format when it is json or yaml; else, for people,
// text does.
func Print(w io.Writer, format string, v any, text func(io.Writer) error) error {
	if Structured(format) {
		return Write(w, format, v)
	}
	return text(w)
}

// PrintItems prints items as WriteItems does when format is json or yaml;
// else, for people, text does.
func PrintItems[T any](w io.Writer, format string, items []T, text func(io.Writer) error) error {
	if Structured(format) {
		return WriteItems(w, format, items)
	}
	return text(w)
}

// Write prints v as json or yaml. The YAML is the JSON converted, so both
// have one shape: the JSON field names.
func Write(w io.Writer, format string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", format, err)
	}
	if format == "yaml" {
		if data, err = yaml.JSONToYAML(data); err != nil {
			return fmt.Errorf("encode yaml: %w", err)
		}
	} else {
		data = append(data, '\n')
	}
	_, err = w.Write(data)
	return err
}

// WriteItems writes a list for programs: json one JSON object per line,
// yaml the same objects as YAML documents, each after "---".
func WriteItems[T any](w io.Writer, format string, items []T) error {
	enc := json.NewEncoder(w)
	for _, it := range items {
		if format == "json" {
			if err := enc.Encode(it); err != nil {
				return err
			}
			continue
		}
		if _, err := io.WriteString(w, "---\n"); err != nil {
			return err
		}
		if err := Write(w, format, it); err != nil {
			return err
		}
	}
	return nil
}
