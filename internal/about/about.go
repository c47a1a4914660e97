// Package about says what a kubexm binary is and what it installs: its
// version, commit and build date, the Go it was built with, the Kubernetes
// versions of the support matrix and the version of each component a
// cluster.yaml that sets nothing gets, as the roles compute it.
package about

import (
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/mensylisir/kubexm/schema/matrix"

	"github.com/mensylisir/kubexm/schema/validate"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm/engine/eval"
	"github.com/mensylisir/kubexm/schema"
)

// Info is `kubexm version`: one shape for -o json and -o yaml.
type Info struct {
	Version    string      `json:"version"`
	Commit     string      `json:"commit"`
	BuildDate  string      `json:"buildDate"`
	GoVersion  string      `json:"goVersion"`
	Platform   string      `json:"platform"`
	Kubernetes Kubernetes  `json:"kubernetes"`
	Components []Component `json:"components"`
}

// Kubernetes is the matrix's Kubernetes range.
type Kubernetes struct {
	Minors  []string `json:"minors"`
	Default string   `json:"default"`
}

// Component is a component's release line and the version installed when
// cluster.yaml names none.
type Component struct {
	Name        string `json:"name"`
	ReleaseLine string `json:"releaseLine"`
	Default     string `json:"default"`
}

// Build is what the linker was told (-ldflags -X); empty fields are read
// from the build information Go records (vcs.revision, vcs.time), so a
// plain `go build` in a checkout still says which commit it is.
type Build struct {
	Version, Commit, Date string
}

// Collect describes this binary with the matrix s and the playbook tree
// content its roles come from.
func Collect(b Build, s *matrix.Support, content fs.FS) (Info, error) {
	info := Info{Version: b.Version, Commit: b.Commit, BuildDate: b.Date, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		fromBuildInfo(&info, bi)
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	if info.BuildDate == "" {
		info.BuildDate = "unknown"
	}
	info.Kubernetes = Kubernetes{Minors: s.Kubernetes.Minors, Default: s.Kubernetes.Default}
	defaults, err := componentDefaults(s, content)
	if err != nil {
		return info, err
	}
	for _, c := range s.Components {
		info.Components = append(info.Components, Component{Name: c.Name, ReleaseLine: c.ReleaseLines(), Default: defaults[c.Name]})
	}
	return info, nil
}

// fromBuildInfo fills what -ldflags did not set from Go's build
// information: the module version of `go install ...@vX`, the commit and
// its time of a build in a git checkout.
func fromBuildInfo(info *Info, bi *debug.BuildInfo) {
	if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		info.Version = bi.Main.Version
	}
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if info.Commit == "" {
				info.Commit = s.Value
			}
		case "vcs.time":
			if info.BuildDate == "" {
				info.BuildDate = s.Value
			}
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	// The commit alone would claim the build is that commit's code.
	if modified && info.Commit != "" && !strings.HasSuffix(info.Commit, "-dirty") {
		info.Commit += "-dirty"
	}
}

// componentDefaults renders each component's default variable (the
// matrix's "FILE VARIABLE") as the roles do for a cluster.yaml that sets
// nothing, so that the versions are the roles' own, never written twice.
// A component installed only with a choice (only_with, e.g. docker with
// containerRuntime.type docker) is rendered for a cluster.yaml making it.
func componentDefaults(s *matrix.Support, content fs.FS) (map[string]string, error) {
	out := map[string]string{}
	for _, comp := range s.Components {
		v, err := componentDefault(s, content, comp)
		if err != nil {
			return nil, err
		}
		out[comp.Name] = v
	}
	return out, nil
}

// componentDefault renders one component's default variable.
func componentDefault(s *matrix.Support, content fs.FS, comp matrix.Component) (string, error) {
	text := schema.MinimalCluster
	if comp.OnlyWith != "" {
		// spec.a.b=v becomes "  a: {b: v}" under MinimalCluster's spec.
		field, value, _ := strings.Cut(comp.OnlyWith, "=")
		keys := strings.Split(strings.TrimPrefix(field, "spec."), ".")
		line := value
		for i := len(keys) - 1; i > 0; i-- {
			line = "{" + keys[i] + ": " + line + "}"
		}
		text += "  " + keys[0] + ": " + line + "\n"
	}
	c, _, err := validate.ParseWith("defaults.yaml", []byte(text), s)
	if err != nil {
		return "", fmt.Errorf("the default cluster of %s: %w", comp.Name, err)
	}
	inv, err := schema.Inventory(c, "defaults.yaml")
	if err != nil {
		return "", fmt.Errorf("the default cluster of %s: %w", comp.Name, err)
	}
	r := &resolver{ev: eval.New(), vars: inv.Vars, raw: map[string]any{}, resolving: map[string]bool{}}
	// Every defaults file a component names: their variables refer to
	// each other (the Kubernetes version, its pins).
	read := map[string]bool{}
	for _, other := range s.Components {
		file, _, _ := strings.Cut(other.Default, " ")
		if read[file] {
			continue
		}
		read[file] = true
		data, err := fs.ReadFile(content, file)
		if err != nil {
			return "", fmt.Errorf("%s: %w", other.Name, err)
		}
		var vars map[string]any
		if err := yaml.Unmarshal(data, &vars); err != nil {
			return "", fmt.Errorf("%s: %w", file, err)
		}
		for k, v := range vars {
			if _, ok := r.raw[k]; !ok {
				r.raw[k] = v
			}
		}
	}
	_, variable, _ := strings.Cut(comp.Default, " ")
	v, err := r.resolve(variable)
	if err != nil {
		return "", fmt.Errorf("%s's default (%s): %w", comp.Name, comp.Default, err)
	}
	return strings.TrimSpace(fmt.Sprint(v)), nil
}

// resolver renders role variables on demand, the ones a template uses
// first, as the engine's lazy variables do.
type resolver struct {
	ev        *eval.Evaluator
	vars      map[string]any // resolved: the inventory's and rendered ones
	raw       map[string]any // the defaults files' variables as written
	resolving map[string]bool
}

func (r *resolver) resolve(name string) (any, error) {
	if v, ok := r.vars[name]; ok {
		return v, nil
	}
	raw, ok := r.raw[name]
	if !ok {
		return nil, fmt.Errorf("no variable %s in the defaults files", name)
	}
	if r.resolving[name] {
		return nil, fmt.Errorf("variable %s refers to itself", name)
	}
	r.resolving[name] = true
	defer delete(r.resolving, name)
	for {
		v, err := r.ev.RenderValue(raw, r.vars)
		var missing *eval.Error
		if errors.As(err, &missing) && missing.Missing != "" {
			root, _, _ := strings.Cut(missing.Missing, ".")
			if _, known := r.raw[root]; known && r.vars[root] == nil {
				if _, err := r.resolve(root); err != nil {
					return nil, err
				}
				continue
			}
		}
		if err != nil {
			return nil, err
		}
		r.vars[name] = v
		return v, nil
	}
}
