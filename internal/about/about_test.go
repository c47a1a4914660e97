package about

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/schema/matrix"

	"github.com/mensylisir/kubexm"
	"github.com/mensylisir/kubexm/schema"
)

// Every component's default is rendered to a version on its release line,
// the one the roles install; etcd's is the schema's default.
func TestCollect(t *testing.T) {
	s, err := matrix.BuiltinSupport()
	if err != nil {
		t.Fatal(err)
	}
	info, err := Collect(Build{Version: "1.2.3", Commit: "abc", Date: "2026-12-01T00:00:00Z"}, s, kubexm.Content())
	if err != nil {
		t.Fatal(err)
	}
	if info.Version != "1.2.3" || info.Commit != "abc" || info.BuildDate != "2026-12-01T00:00:00Z" || !strings.HasPrefix(info.GoVersion, "go") {
		t.Errorf("build fields: %+v", info)
	}
	if info.Kubernetes.Default != schema.DefaultKubernetesVersion || len(info.Kubernetes.Minors) == 0 {
		t.Errorf("kubernetes: %+v", info.Kubernetes)
	}
	if len(info.Components) != len(s.Components) {
		t.Fatalf("components: %+v", info.Components)
	}
	for _, c := range info.Components {
		if c.Default == "" || strings.Contains(c.Default, "{{") || !onLines(c.Default, c.ReleaseLine) {
			t.Errorf("%s: default %q not a version on %s", c.Name, c.Default, c.ReleaseLine)
		}
		if c.Name == "etcd" && c.Default != schema.DefaultEtcdVersion {
			t.Errorf("etcd default %s, schema's %s", c.Default, schema.DefaultEtcdVersion)
		}
	}
}

// Without -ldflags the commit and date come from Go's build information,
// marked when the tree had changes.
func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0bb74d5"}, {Key: "vcs.time", Value: "2026-12-01T21:50:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	var info Info
	fromBuildInfo(&info, bi)
	if info.Version != "" || info.Commit != "0bb74d5-dirty" || info.BuildDate != "2026-12-01T21:50:00Z" {
		t.Errorf("%+v", info)
	}
	info = Info{Version: "v9", Commit: "given", BuildDate: "given"}
	fromBuildInfo(&info, &debug.BuildInfo{Main: debug.Module{Version: "v1.0.0"}, Settings: bi.Settings[:2]})
	if info.Version != "v9" || info.Commit != "given" || info.BuildDate != "given" {
		t.Errorf("-ldflags values replaced: %+v", info)
	}
	info = Info{}
	fromBuildInfo(&info, &debug.BuildInfo{Main: debug.Module{Version: "v1.0.0"}})
	if info.Version != "v1.0.0" {
		t.Errorf("go install's module version: %+v", info)
	}
}

// onLines reports whether version v is on one of the release lines
// ("v3.6.x, v3.7.x").
func onLines(v, lines string) bool {
	v = strings.TrimPrefix(v, "v")
	for _, line := range strings.Split(lines, ", ") {
		if strings.HasPrefix(v, strings.TrimPrefix(strings.TrimSuffix(line, ".x"), "v")+".") {
			return true
		}
	}
	return false
}
