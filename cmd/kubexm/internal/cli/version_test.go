package cli

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm/schema"
)

// kubexm version: the binary's build and what it installs, in text, and as
// one document in JSON and YAML.
func TestVersionCommand(t *testing.T) {
	out, code := runMain(t, "version")
	for _, want := range []string{"kubexm       " + version, "commit", "built", "go           go1.", "kubernetes   v1.35 to v1.37", "etcd         " + schema.DefaultEtcdVersion} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("version lacks %q (exit %d):\n%s", want, code, out)
		}
	}
	js, code := runMain(t, "version", "-o", "json")
	if code != 0 {
		t.Fatal(js)
	}
	var fromJSON, fromYAML map[string]any
	if err := json.Unmarshal([]byte(js), &fromJSON); err != nil {
		t.Fatalf("%v:\n%s", err, js)
	}
	ys, code := runMain(t, "version", "-o", "yaml")
	if err := yaml.Unmarshal([]byte(ys), &fromYAML); err != nil || code != 0 {
		t.Fatalf("%v:\n%s", err, ys)
	}
	if !reflect.DeepEqual(fromJSON, fromYAML) {
		t.Errorf("JSON and YAML differ:\n%s\n%s", js, ys)
	}
	var keys []string
	for k := range fromJSON {
		keys = append(keys, k)
	}
	for _, k := range []string{"version", "commit", "buildDate", "goVersion", "platform", "kubernetes", "components"} {
		if _, ok := fromJSON[k]; !ok {
			t.Errorf("version -o json lacks %s: %v", k, keys)
		}
	}
	if k := fromJSON["kubernetes"].(map[string]any); k["default"] != schema.DefaultKubernetesVersion {
		t.Errorf("kubernetes: %v", k)
	}
	if out, code := runMain(t, "version", "-o", "xml"); code != 1 || !strings.Contains(out, "text, json or yaml") {
		t.Errorf("-o xml: exit %d:\n%s", code, out)
	}
}
