package schema

import (
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/schema/matrix"

	"github.com/goccy/go-yaml"
	"github.com/mensylisir/kubexm"
)

// TestDefaultVersionsOnTheirReleaseLines: the versions installed by
// default are on the release lines the matrix names (the roles' plain
// values; templated ones are checked where they come from: the schema's).
func TestDefaultVersionsOnTheirReleaseLines(t *testing.T) {
	s, err := matrix.BuiltinSupport()
	if err != nil {
		t.Fatal(err)
	}
	schemaDefaults := map[string]string{"etcd": DefaultEtcdVersion, "containerd": defaultRuntimeVersion("containerd"), "docker": defaultRuntimeVersion("docker")}
	for _, c := range s.Components {
		v := schemaDefaults[c.Name]
		if v == "" {
			file, variable, _ := strings.Cut(c.Default, " ")
			data, err := fs.ReadFile(kubexm.Content(), file)
			if err != nil {
				t.Fatal(err)
			}
			var vars map[string]any
			if err := yaml.Unmarshal(data, &vars); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			v = fmt.Sprint(vars[variable])
			if strings.Contains(v, "{{") {
				continue
			}
		}
		if !c.InRelease(v) {
			t.Errorf("%s: the default %s is not on the release line %s", c.Name, v, c.Versions)
		}
	}
}
