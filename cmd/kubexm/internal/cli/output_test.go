package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// jsonDocs parses what -o json printed: one document, or one per line.
func jsonDocs(t *testing.T, out string) []any {
	t.Helper()
	return decodeAll(t, json.NewDecoder(strings.NewReader(out)), out)
}

// yamlDocs parses what -o yaml printed: one document, or several after
// "---".
func yamlDocs(t *testing.T, out string) []any {
	t.Helper()
	return decodeAll(t, yaml.NewDecoder(bytes.NewReader([]byte(out))), out)
}

func decodeAll(t *testing.T, dec interface{ Decode(any) error }, out string) []any {
	t.Helper()
	var docs []any
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("cannot parse: %v:\n%s", err, out)
		}
		docs = append(docs, v)
	}
}

// sameShape runs a command with -o json and -o yaml and wants the same
// documents from both (numbers compared as JSON reads them); it returns
// the JSON ones.
func sameShape(t *testing.T, args ...string) []any {
	t.Helper()
	js, code := runMain(t, append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("%v -o json: exit %d:\n%s", args, code, js)
	}
	ys, code := runMain(t, append(args, "-o", "yaml")...)
	if code != 0 {
		t.Fatalf("%v -o yaml: exit %d:\n%s", args, code, ys)
	}
	fromJSON, fromYAML := jsonDocs(t, js), yamlDocs(t, ys)
	// YAML reads integers as uint64/int64: compare through JSON.
	norm := func(v []any) []any {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var out []any
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if len(fromJSON) == 0 || !reflect.DeepEqual(norm(fromJSON), norm(fromYAML)) {
		t.Errorf("%v: -o json and -o yaml differ:\n%s\n---\n%s", args, js, ys)
	}
	return fromJSON
}

// keys are a document's top-level keys.
func hasKeys(t *testing.T, what string, doc any, keys ...string) {
	t.Helper()
	m, ok := doc.(map[string]any)
	if !ok {
		t.Fatalf("%s: not an object: %v", what, doc)
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s lacks %q: %v", what, k, m)
		}
	}
}

// Every command with -o json has -o yaml, with the same documents, and the
// shapes docs/guide.md documents.
func TestOutputShapes(t *testing.T) {
	t.Chdir(t.TempDir())
	if out, code := runMain(t, "create", "config", "-o", "cluster.yaml"); code != 0 {
		t.Fatal(out)
	}
	docs := sameShape(t, "config", "validate")
	hasKeys(t, "config validate", docs[0], "file", "valid", "cluster", "problems", "warnings")
	docs = sameShape(t, "config", "view")
	hasKeys(t, "config view", docs[0], "apiVersion", "kind", "metadata", "spec")
	docs = sameShape(t, "support")
	hasKeys(t, "support", docs[0], "kubernetes", "components", "choices")
	docs = sameShape(t, "playbook", "list")
	if len(docs) < 5 {
		t.Errorf("playbook list: %v", docs)
	}
	for _, d := range docs {
		hasKeys(t, "playbook list", d, "name", "version", "description", "needsCluster")
	}
	docs = sameShape(t, "version")
	hasKeys(t, "version", docs[0], "version", "commit", "buildDate", "goVersion", "platform", "kubernetes", "components")

	// An invalid file: the verdict with every problem at its place, and
	// exit 1.
	sample, err := os.ReadFile("cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := writeFile(t, "bad.yaml", strings.Replace(string(sample), "plugin: flannel", "plugin: bogus", 1))
	out, code := runMain(t, "config", "validate", "-f", bad, "-o", "json")
	docs = jsonDocs(t, out[:strings.Index(out, "Error: ")])
	v := docs[0].(map[string]any)
	problems, _ := v["problems"].([]any)
	if code != 1 || v["valid"] != false || len(problems) != 1 {
		t.Fatalf("invalid file: exit %d:\n%s", code, out)
	}
	hasKeys(t, "a problem", problems[0], "file", "line", "col", "path", "message")
	for _, args := range [][]string{{"config", "validate", "-o", "xml"}, {"config", "view", "-o", "text"}, {"get", "clusters", "-o", "wide"}, {"support", "-o", "xml"}, {"playbook", "list", "-o", "xml"}} {
		if out, code := runMain(t, args...); code != 1 || !strings.Contains(out, "--output must be") {
			t.Errorf("%v: exit %d:\n%s", args, code, out)
		}
	}
}

// get nodes, get clusters and describe cluster against the API fixture:
// the same documents in JSON and YAML.
func TestGetOutputShapes(t *testing.T) {
	apiFixture(t)
	for _, d := range sameShape(t, "get", "nodes") {
		hasKeys(t, "get nodes", d, "name", "address", "roles", "status")
	}
	for _, d := range sameShape(t, "get", "clusters") {
		hasKeys(t, "get clusters", d, "name", "work_dir", "kubeconfig", "runs")
	}
	hasKeys(t, "describe cluster", sameShape(t, "describe", "cluster")[0], "name")
}
