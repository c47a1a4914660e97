package validate

import (
	. "github.com/mensylisir/kubexm/schema"
	"github.com/mensylisir/kubexm/schema/matrix"
	"github.com/mensylisir/kubexm/schema/rolevars"

	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm"
	"github.com/mensylisir/kubexm/schema/internal/fieldpath"
)

// permissive is the built-in matrix with every choice and component
// version supported, so the tests of the schema's own rules (kube-vip needs
// lb_address, ...) are not about what the roles install.
var permissive = func() *matrix.Support {
	s, err := matrix.BuiltinSupport()
	if err != nil {
		panic(err)
	}
	for i := range s.Choices {
		for j := range s.Choices[i].Values {
			s.Choices[i].Values[j].Status = matrix.StatusSupported
		}
	}
	for i := range s.Components {
		s.Components[i].Field, s.Components[i].Variable = "", ""
	}
	return s
}()

func parse(path string, data []byte, lookup func(string) (string, bool)) (*Cluster, []Warning, error) {
	return parseWith(path, data, lookup, permissive)
}

// supportProblems parses y against the built-in matrix.
func supportProblems(t *testing.T, y string) []Problem {
	t.Helper()
	_, _, err := parseWith("c.yaml", []byte(y), noEnv, nil)
	if err == nil {
		return nil
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error is %T, not *Error: %v", err, err)
	}
	return e.Problems
}

// schemaChoice is one enumerated or boolean field of cluster.yaml.
type schemaChoice struct {
	path   string
	values []string
}

// schemaChoices walks the Cluster type for every field with an enum tag
// and every boolean, with [*] for list elements and map entries.
func schemaChoices() []schemaChoice {
	var out []schemaChoice
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Slice, reflect.Map:
			if e := t.Elem(); e.Kind() == reflect.Struct || e.Kind() == reflect.Pointer {
				walk(e, path+"[*]")
			}
			return
		case reflect.Struct:
		default:
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name := YAMLName(f)
			if name == "" {
				continue
			}
			p := fieldpath.Child(path, name)
			if enum, ok := f.Tag.Lookup("enum"); ok {
				vals := slices.DeleteFunc(strings.Split(enum, ","), func(s string) bool { return s == "" })
				out = append(out, schemaChoice{p, vals})
				continue
			}
			if f.Type.Kind() == reflect.Bool {
				out = append(out, schemaChoice{p, []string{"true", "false"}})
				continue
			}
			walk(f.Type, p)
		}
	}
	walk(reflect.TypeFor[Spec](), "spec")
	return out
}

// TestMatrixCoversEveryChoice: every enumerated value and boolean of
// cluster.yaml has a status in the matrix, so a new choice cannot be added
// without deciding whether it is installed; and every matrix entry names a
// real field and value.
func TestMatrixCoversEveryChoice(t *testing.T) {
	s, err := matrix.BuiltinSupport()
	if err != nil {
		t.Fatal(err)
	}
	choices := schemaChoices()
	if len(choices) < 20 {
		t.Fatalf("walked only %d choices: %v", len(choices), choices)
	}
	known := map[string]schemaChoice{}
	for _, c := range choices {
		known[c.path] = c
		ch := s.Choice(c.path)
		if ch == nil {
			t.Errorf("%s (%s) is not in %s: add it with a status for each value", c.path, strings.Join(c.values, ", "), matrix.SupportFile)
			continue
		}
		for _, v := range c.values {
			if ch.Value(v) == nil {
				t.Errorf("%s: value %s has no status in %s", c.path, v, matrix.SupportFile)
			}
		}
	}
	// Entries beyond the enumerations ((set)/(unset) of lists and blocks)
	// must name a field the schema has.
	var probe Cluster
	for _, ch := range s.Choices {
		if c, ok := known[ch.Field]; ok {
			for _, v := range ch.Values {
				if !slices.Contains(c.values, v.Value) && v.Value != matrix.ValueUnset {
					t.Errorf("%s: %s lists value %q, which the schema does not have", matrix.SupportFile, ch.Field, v.Value)
				}
			}
		} else if !fieldExists(reflect.TypeOf(probe), ch.Field) {
			t.Errorf("%s: choice %s names no cluster.yaml field", matrix.SupportFile, ch.Field)
		} else {
			for _, v := range ch.Values {
				if fieldTag(reflect.TypeOf(probe), ch.Field, "choice") == "value" {
					continue // a list of names: any name, and (other)
				}
				if v.Value != matrix.ValueSet && v.Value != matrix.ValueUnset {
					t.Errorf("%s: %s is neither an enumeration nor a boolean; its values are (set) and (unset), not %q", matrix.SupportFile, ch.Field, v.Value)
				}
			}
		}
		if ch.OnlyWith != "" {
			f, v, _ := strings.Cut(ch.OnlyWith, "=")
			if c, ok := known[f]; !ok || !slices.Contains(c.values, v) {
				t.Errorf("%s: %s only_with %s: no such enumerated field and value", matrix.SupportFile, ch.Field, ch.OnlyWith)
			}
		}
	}
	for _, c := range s.Components {
		if c.Field != "" && !fieldExists(reflect.TypeOf(probe), c.Field) {
			t.Errorf("%s: component %s: field %s does not exist", matrix.SupportFile, c.Name, c.Field)
		}
	}
}

func fieldExists(t reflect.Type, pattern string) bool {
	_, ok := fieldLookup(pattern)
	return ok
}

// fieldTag is the tag key of the field a pattern names ("" when none).
func fieldTag(_ reflect.Type, pattern, key string) string {
	f, _ := fieldLookup(pattern)
	return f.Tag.Get(key)
}

// fieldLookup finds the struct field a pattern such as spec.hosts[*].arch
// names.
func fieldLookup(pattern string) (reflect.StructField, bool) {
	segs := strings.Split(pattern, ".")
	if segs[0] != "spec" {
		return reflect.StructField{}, false
	}
	t := reflect.TypeFor[Spec]()
	var f reflect.StructField
	for _, seg := range segs[1:] {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return reflect.StructField{}, false
		}
		name, each := strings.CutSuffix(seg, "[*]")
		idx, ok := YAMLFields(t)[name]
		if !ok {
			return reflect.StructField{}, false
		}
		f = t.Field(idx)
		t = f.Type
		if each {
			if t.Kind() != reflect.Slice && t.Kind() != reflect.Map {
				return reflect.StructField{}, false
			}
			t = t.Elem()
		}
	}
	return f, true
}

// TestDefaultsAreSupported: a cluster.yaml that sets nothing optional is
// accepted by the built-in matrix, and the schema's default version is the
// matrix's.
func TestDefaultsAreSupported(t *testing.T) {
	s, err := matrix.BuiltinSupport()
	if err != nil {
		t.Fatal(err)
	}
	if s.Kubernetes.Default != DefaultKubernetesVersion {
		t.Errorf("matrix default %s, schema DefaultKubernetesVersion %s", s.Kubernetes.Default, DefaultKubernetesVersion)
	}
	y := edit(t, "plugin: calico", "plugin: flannel")
	if ps := supportProblems(t, y); ps != nil {
		t.Fatalf("defaults refused: %v", ps)
	}
	minimal := strings.Replace(strings.Replace(y, "  network:\n    plugin: flannel\n", "", 1), "  etcd:\n    type: kubexm\n", "", 1)
	if ps := supportProblems(t, minimal); ps != nil {
		t.Fatalf("defaults refused: %v", ps)
	}
}

// TestUnsupportedChoicesRefused: every choice the roles do not install is
// an error at its field, all of them in one report, with what is supported.
func TestUnsupportedChoicesRefused(t *testing.T) {
	y := edit(t,
		"version: v1.37.2", "type: kubeadm\n    version: v1.37.2\n    autoRenewCerts: true\n    containerRuntime: {type: cri-o}",
		"plugin: calico", "plugin: calico\n    calico: {ipipMode: Always, vxlanMode: Never}\n  storage: {openebs: {basePath: /x}}\n  addons: [metallb]\n  registry:\n    type: harbor",
		"worker: [w1]", "worker: [w1]\n    registry: [lb1]")
	ps := supportProblems(t, y)
	want := map[string]string{
		"spec.kubernetes.containerRuntime.type": "cri-o is not supported yet",
		"spec.network.calico.ipipMode":          "Always is not supported yet",
		"spec.storage.openebs":                  "setting openebs is not supported yet",
		"spec.addons[0]":                        "metallb is not supported yet",
		"spec.registry.type":                    "harbor is not supported yet",
	}
	got := map[string]Problem{}
	for _, p := range ps {
		got[p.Path] = p
	}
	for path, msg := range want {
		p, ok := got[path]
		switch {
		case !ok:
			t.Errorf("no problem at %s; got %v", path, ps)
		case !strings.Contains(p.Message, msg):
			t.Errorf("%s: %q lacks %q", path, p.Message, msg)
		case p.Pos.Line == 0 || p.Pos.File != "c.yaml":
			t.Errorf("%s: no file:line: %v", path, p.Pos)
		case !strings.HasPrefix(p.Hint, "supported: "):
			t.Errorf("%s: hint %q does not say what is supported", path, p.Hint)
		}
	}
	// kubeadm mode is installed (make e2e-kubeadm).
	if p, ok := got["spec.kubernetes.type"]; ok {
		t.Errorf("kubernetes.type kubeadm refused: %v", p)
	}
	// calico is installed (make e2e-kubeadm).
	if p, ok := got["spec.network.plugin"]; ok {
		t.Errorf("network.plugin calico refused: %v", p)
	}
}

func TestSeveralMastersWithoutLoadBalancerWarned(t *testing.T) {
	_, warnings, err := parseWith("c.yaml", []byte(edit(t, "plugin: calico", "plugin: flannel")), noEnv, nil)
	if err != nil || !strings.Contains(warningText(warnings), "c.yaml:16:11: spec.controlPlaneEndpoint: 2 masters but no load balancer: the control-plane domain resolves to the first master (m1) only") {
		t.Errorf("%v %v", warnings, err)
	}
	_, warnings, err = parseWith("c.yaml", []byte(edit(t, "plugin: calico", "plugin: flannel", "domain: lb.kubexm.local", "domain: lb.kubexm.local\n    externalLoadBalancer: external\n    lb_address: 192.168.1.100")), noEnv, nil)
	if err != nil || strings.Contains(warningText(warnings), "masters but no load balancer") {
		t.Errorf("with lb_address: %v %v", warnings, err)
	}
	_, warnings, err = parseWith("c.yaml", []byte(edit(t, "plugin: calico", "plugin: flannel", "domain: lb.kubexm.local", "domain: lb.kubexm.local\n    internalLoadbalancer: haproxy")), noEnv, nil)
	if err != nil || strings.Contains(warningText(warnings), "masters but no load balancer") {
		t.Errorf("with internalLoadbalancer haproxy: %v %v", warnings, err)
	}
}

func TestKubernetesVersionRange(t *testing.T) {
	for _, tc := range []struct{ version, msg string }{
		{"v1.34.9", "Kubernetes v1.34.9 is not supported"},
		{"v1.38.0", "Kubernetes v1.38.0 is not supported"},
		{"v1.33.13", "Kubernetes v1.33.13 is not supported"},
		{"v1.37", "is not a Kubernetes version"},
	} {
		ps := supportProblems(t, edit(t, "plugin: calico", "plugin: flannel", "version: v1.37.2", "version: "+tc.version))
		if len(ps) != 1 || ps[0].Path != "spec.kubernetes.version" || !strings.Contains(ps[0].Message, tc.msg) ||
			!strings.Contains(ps[0].Hint, "v1.35 to v1.37") || ps[0].Pos.Line != 18 {
			t.Errorf("%s: %v", tc.version, ps)
		}
	}
	for _, v := range []string{"v1.35.0", "v1.36.3", "1.37.2"} {
		if ps := supportProblems(t, edit(t, "plugin: calico", "plugin: flannel", "version: v1.37.2", "version: "+v)); ps != nil {
			t.Errorf("%s refused: %v", v, ps)
		}
	}
	_, warnings, err := parseWith("c.yaml", []byte(edit(t, "plugin: calico", "plugin: flannel", "version: v1.37.2", "version: v1.36.9")), noEnv, nil)
	if err != nil || !strings.Contains(warningText(warnings), "c.yaml:18:14: spec.kubernetes.version: Kubernetes v1.36.9 is newer than v1.36.3, the newest v1.36 patch") {
		t.Errorf("newer patch: %v %v", warnings, err)
	}
	s, _ := matrix.BuiltinSupport()
	if v, err := s.KubernetesVersion("1.36.3"); err != nil || v != "v1.36.3" {
		t.Errorf("KubernetesVersion(1.36.3) = %q, %v", v, err)
	}
	if v, err := s.KubernetesVersion("v1.37"); err != nil || v != DefaultKubernetesVersion {
		t.Errorf("KubernetesVersion(v1.37) = %q, %v", v, err)
	}
	if v, err := s.KubernetesVersion("1.35"); err != nil || v != "v1.35.4" {
		t.Errorf("KubernetesVersion(1.35) = %q, %v", v, err)
	}
	if _, err := s.KubernetesVersion("v1.33.13"); err == nil || !strings.Contains(err.Error(), "v1.35 to v1.37") {
		t.Errorf("KubernetesVersion(v1.33.13): %v", err)
	}
}

// TestRemovedFeatureGates: a gate is refused from the minor that removed it
// on, naming that minor; older minors accept it.
func TestRemovedFeatureGates(t *testing.T) {
	gates := func(version string) []Problem {
		return supportProblems(t, edit(t, "plugin: calico", "plugin: flannel",
			"version: v1.37.2", "version: "+version+"\n    featureGates: {MemoryManager: true, TTLAfterFinished: true, SidecarContainers: false, SomeNewGate: true}"))
	}
	ps := gates("v1.35.4")
	if len(ps) != 1 || !strings.Contains(ps[0].Message, "TTLAfterFinished was removed in Kubernetes v1.35 or earlier") {
		t.Errorf("v1.35: %v", ps)
	}
	// A gate a later minor introduced is unknown to the chosen one.
	s, _ := matrix.BuiltinSupport()
	newer := s.Kubernetes.FeatureGatesAdded["v1.37"][0]
	ps = supportProblems(t, edit(t, "plugin: calico", "plugin: flannel", "version: v1.37.2", "version: v1.36.3\n    featureGates: {"+newer+": true}"))
	if len(ps) != 1 || !strings.Contains(ps[0].Message, "feature gate "+newer+" was introduced in Kubernetes v1.37: the components of v1.36.3 do not know it") ||
		ps[0].Hint != "use Kubernetes v1.37 or later, or remove the gate" {
		t.Errorf("newer gate on v1.36: %v", ps)
	}
	if ps := supportProblems(t, edit(t, "plugin: calico", "plugin: flannel", "version: v1.37.2", "version: v1.37.0\n    featureGates: {"+newer+": true}")); ps != nil {
		t.Errorf("%s refused on v1.37: %v", newer, ps)
	}
	ps = gates("v1.36.3")
	if len(ps) != 2 || !strings.Contains(ps[0].Message+ps[1].Message, "MemoryManager was removed in Kubernetes v1.36: the components of v1.36.3") {
		t.Errorf("v1.36: %v", ps)
	}
	ps = gates("v1.37.2")
	if len(ps) != 3 || ps[0].Path != "spec.kubernetes.featureGates.MemoryManager" || ps[0].Pos.Line != 19 {
		t.Errorf("v1.37: %v", ps)
	}
	for _, p := range ps {
		if p.Hint != "remove it from kubernetes.featureGates" {
			t.Errorf("hint %q", p.Hint)
		}
	}
}

func TestComponentVersions(t *testing.T) {
	ps := supportProblems(t, edit(t, "plugin: calico", "plugin: flannel",
		"type: kubexm", "type: kubexm\n    version: v3.5.21",
		"version: v1.37.2", "version: v1.37.2\n    containerRuntime: {type: containerd, version: 1.7.27}"))
	if len(ps) != 2 || !strings.Contains(ps[0].Message, "containerd 1.7.27 is not supported") || !strings.Contains(ps[0].Hint, "containerd 2.x") ||
		!strings.Contains(ps[1].Message, "etcd v3.5.21 is not supported") || !strings.Contains(ps[1].Hint, "etcd v3.6.x, v3.7.x") {
		t.Errorf("%v", ps)
	}
	if ps := supportProblems(t, edit(t, "plugin: calico", "plugin: flannel", "type: kubexm", "type: kubexm\n    version: v3.6.0")); ps != nil {
		t.Errorf("etcd v3.6.0 refused: %v", ps)
	}
	if ps := supportProblems(t, edit(t, "plugin: calico", "plugin: flannel", "type: kubexm", "type: kubexm\n    version: v3.7.3")); ps != nil {
		t.Errorf("etcd v3.7.3 refused: %v", ps)
	}
	if ps := supportProblems(t, edit(t, "plugin: calico", "plugin: flannel", "type: kubexm", "type: kubexm\n    version: v3.8.0")); len(ps) != 1 || !strings.Contains(ps[0].Message, "etcd v3.8.0 is not supported") {
		t.Errorf("etcd v3.8.0: %v", ps)
	}
}

// TestMatrixPointersResolve: every "FILE VARIABLE" pointer of the matrix
// names a variable its file defines, so the pointers follow the roles.
func TestMatrixPointersResolve(t *testing.T) {
	s, err := matrix.BuiltinSupport()
	if err != nil {
		t.Fatal(err)
	}
	ptrs := map[string]string{"kubernetes mirrors": s.Kubernetes.Mirrors}
	for _, c := range s.Components {
		ptrs[c.Name+" default"], ptrs[c.Name+" mirrors"] = c.Default, c.Mirrors
	}
	for what, p := range ptrs {
		file, variable, ok := strings.Cut(p, " ")
		if !ok {
			t.Errorf("%s: %q is not FILE VARIABLE", what, p)
			continue
		}
		data, err := fs.ReadFile(kubexm.Content(), file)
		if err != nil {
			t.Errorf("%s: %v", what, err)
			continue
		}
		if !strings.HasPrefix(string(data), variable+":") && !strings.Contains(string(data), "\n"+variable+":") {
			t.Errorf("%s: %s does not define %s", what, file, variable)
		}
	}
}

func TestParseSupportRejectsIncoherentMatrix(t *testing.T) {
	for _, tc := range []struct{ yaml, msg string }{
		{"kubernetes: {minors: [v1.36, v1.35], default: v1.36.1}\nchoices: {}\n", "oldest first"},
		{"kubernetes: {minors: [v1.35], default: v1.36.1}\nchoices: {}\n", "kubernetes.default"},
		{"kubernetes: {minors: [v1.35], default: v1.35.1}\nchoices: {spec.addons: {(set): {status: maybe}}}\n", `status "maybe"`},
		{"kubernetes: {minors: [v1.35], default: v1.35.1}\nchoices: {spec.addons: {(set): {status: not supported yet}}}\n", "needs a reason"},
		{"kubernetes: {minors: [v1.35], default: v1.35.1}\nchoices: {spec.addons: {(set): {status: supported}}}\n", "supported needs tested"},
		{"kubernetes: {minors: [v1.35], default: v1.35.1, skew: {upgrade_max_minors: 0}}\n", "kubernetes.skew"},
		{"kubernetes: {minors: [v1.35], default: v1.35.1, feature_gates_removed: {v1.30: [X]}}\n", "not one of the minors"},
		{"kubernetes: {minors: [v1.35], default: v1.35.1}\nbogus: 1\n", "bogus"},
		{"kubernetes: {minors: [v1.35], default: v1.35.1, tested_patches: {v1.35: v1.36.0}}\n", "tested_patches"},
		{"kubernetes: {minors: [v1.35], default: v1.35.1}\nos_package_sets: {rpm: {status: not supported yet}}\n", "os_package_sets rpm: not supported yet needs a reason"},
		{"kubernetes: {minors: [v1.35], default: v1.35.1}\nos_package_sets: {deb: {status: supported}}\n", "os_package_sets deb: supported needs tested"},
		{"kubernetes: {minors: [v1.35], default: v1.35.1}\nos_package_sets: {deb: {status: supported, tested: x, role: y}}\n", "role is for choices"},
	} {
		if _, err := matrix.ParseSupport("m.yaml", []byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), "m.yaml") {
			t.Errorf("%q: %v", tc.yaml, err)
		}
	}
}

// TestOSPackageSets: the built-in matrix says which package families an
// offline bundle carries, with the evidence only under --evidence.
func TestOSPackageSets(t *testing.T) {
	s, err := matrix.BuiltinSupport()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]matrix.ChoiceValue{}
	for _, v := range s.OSPackageSets {
		got[v.Value] = v
	}
	if !got["deb"].Supported() || got["deb"].Tested == "" || got["rpm"].Supported() || got["rpm"].Reason == "" {
		t.Errorf("os_package_sets: %+v, want deb supported with its evidence, rpm not supported yet with a reason", s.OSPackageSets)
	}
	var b strings.Builder
	s.WithoutEvidence().WriteText(&b, nil)
	if !strings.Contains(b.String(), "OS packages in offline bundles") || strings.Contains(b.String(), got["deb"].Tested) || !strings.Contains(b.String(), got["rpm"].Reason) {
		t.Errorf("kubexm support without --evidence:\n%s", b.String())
	}
}

func TestWarnOnlyPlaybook(t *testing.T) {
	s, err := matrix.BuiltinSupport()
	if err != nil {
		t.Fatal(err)
	}
	if s.ForPlaybook("create-cluster") != s {
		t.Error("create-cluster is warn-only")
	}
	y := edit(t, "version: v1.37.2", "version: v1.33.13", "plugin: calico", "plugin: calico\n    calico: {ipipMode: Always, vxlanMode: Never}")
	_, warnings, err := parseWith("c.yaml", []byte(y), noEnv, s.ForPlaybook("delete"))
	if err != nil {
		t.Fatalf("delete refused: %v", err)
	}
	w := warningText(warnings)
	for _, want := range []string{"c.yaml:18:14: spec.kubernetes.version: Kubernetes v1.33.13 is not supported by this kubexm (ignored: this playbook installs nothing)", "ipipMode: Always is not supported yet"} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
}

// TestCustomRoleChoices: network.plugin and containerRuntime.type custom
// are accepted when the playbook tree holds the role they name (default
// custom-cni and custom-runtime, or customRole) with tasks/main.yaml and
// tasks/delete.yaml, with a warning that kubexm does not check what it
// installs; a missing role is an error at the field naming the directories
// searched; calico stays refused.
func TestCustomRoleChoices(t *testing.T) {
	builtin, err := matrix.BuiltinSupport()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{
		"custom-cni/tasks/main.yaml": true, "custom-cni/tasks/delete.yaml": true,
		"site-runtime/tasks/main.yaml": true, "site-runtime/tasks/delete.yml": true,
		"cni/nodelete/tasks/main.yaml": true,
	}
	s := builtin.WithRoles(func(file string) (bool, []string) {
		return have[file], []string{"fork/roles", "the built-in roles"}
	})
	parse := func(y string) ([]Warning, []Problem) {
		_, warns, err := parseWith("c.yaml", []byte(y), noEnv, s)
		if err == nil {
			return warns, nil
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("error is %T, not *Error: %v", err, err)
		}
		return warns, e.Problems
	}

	warns, ps := parse(edit(t, "plugin: calico", "plugin: custom", "version: v1.37.2", "version: v1.37.2\n    containerRuntime: {type: custom, customRole: site-runtime}"))
	if ps != nil {
		t.Fatalf("custom roles that exist refused: %v", ps)
	}
	var said []string
	for _, w := range warns {
		if strings.Contains(w.Message, "kubexm does not check what that role installs") {
			said = append(said, w.Path+": "+w.Message)
		}
	}
	if len(said) != 2 || !strings.Contains(strings.Join(said, "\n"), `role "custom-cni"`) || !strings.Contains(strings.Join(said, "\n"), `role "site-runtime"`) {
		t.Errorf("warnings about the custom roles: %q", said)
	}

	for name, tc := range map[string]struct{ y, path, msg string }{
		"missing role": {edit(t, "plugin: calico", "plugin: custom\n    customRole: site/net"), "spec.network.customRole",
			`role "site/net" has no tasks/main.yaml in fork/roles, the built-in roles`},
		"no delete.yaml": {edit(t, "plugin: calico", "plugin: custom\n    customRole: cni/nodelete"), "spec.network.customRole",
			`role "cni/nodelete" has no tasks/delete.yaml`},
		"runtime default role missing": {edit(t, "plugin: calico", "plugin: flannel", "version: v1.37.2", "version: v1.37.2\n    containerRuntime: {type: custom}"),
			"spec.kubernetes.containerRuntime.customRole", `role "custom-runtime" has no tasks/main.yaml`},
		"calico ipip still refused": {edit(t, "plugin: calico", "plugin: calico\n    calico: {ipipMode: Always, vxlanMode: Never}"), "spec.network.calico.ipipMode", "Always is not supported yet"},
	} {
		_, ps := parse(tc.y)
		found := false
		for _, p := range ps {
			if p.Path == tc.path && strings.Contains(p.Message, tc.msg) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no problem at %s with %q; got %v", name, tc.path, tc.msg, ps)
		}
	}

	// customRole without plugin custom is ignored with a warning.
	warns, _ = parse(edit(t, "plugin: calico", "plugin: flannel\n    customRole: custom-cni"))
	ok := false
	for _, w := range warns {
		ok = ok || (w.Path == "spec.network.customRole" && strings.Contains(w.Message, "ignored"))
	}
	if !ok {
		t.Errorf("customRole with flannel: no warning; got %v", warns)
	}
}

// TestPlaybookChoices: backup and restore refuse, at the field and before
// any task, what they do not handle although create-cluster installs it (an
// external etcd), rollback kubeadm mode; kubeadm's stacked etcd, kubeadm mode with etcd.type kubexm
// and binary mode pass; other playbooks are not concerned. A refusal
// with only_with names the field it depends on.
func TestPlaybookChoices(t *testing.T) {
	s, err := matrix.BuiltinSupport()
	if err != nil {
		t.Fatal(err)
	}
	flannel := []string{"plugin: calico", "plugin: flannel"}
	kubeadmKubexm := edit(t, append(flannel, "version: v1.37.2", "type: kubeadm\n    version: v1.37.2")...)
	stacked := edit(t, append(flannel, "etcd: [m1]", "etcd: []", "type: kubexm", "type: kubeadm", "version: v1.37.2", "type: kubeadm\n    version: v1.37.2")...)
	external := edit(t, append(flannel, "etcd: [m1]", "etcd: []", "type: kubexm", "type: external\n    external: {endpoints: [\"https://10.1.1.1:2379\"]}")...)
	binary := edit(t, flannel...)
	registry := edit(t, "worker: [w1]", "worker: [w1]\n    registry: [w1]", "plugin: calico", "plugin: flannel\n  registry: {type: registry, privateRegistry: r.local, auths: {r.local: {username: u, password: p}}}")
	externalRegistry := edit(t, "plugin: calico", "plugin: flannel\n  registry: {type: external, privateRegistry: r.local, auths: {r.local: {username: u, password: p}}}")
	for _, tc := range []struct {
		name, yaml, playbook, want string
	}{
		{"kubeadm with etcd kubexm, backup", kubeadmKubexm, "backup", ""},
		{"kubeadm with etcd kubexm, restore", kubeadmKubexm, "restore", ""},
		{"external etcd, restore", external, "restore", "c.yaml:20:11: spec.etcd.type: playbook restore does not support etcd.type external yet: backup and restore read and rebuild an etcd kubexm or kubeadm runs"},
		{"external etcd, backup", external, "backup", "playbook backup does not support etcd.type external yet"},
		{"kubeadm with etcd kubexm, create-cluster", kubeadmKubexm, "create-cluster", ""},
		{"external etcd, create-cluster", external, "create-cluster", ""},
		{"stacked etcd, backup", stacked, "backup", ""},
		{"stacked etcd, restore", stacked, "restore", ""},
		{"binary mode, restore", binary, "restore", ""},
		{"registry kubexm deploys, rotate-ca", registry, "rotate-ca", ""},
		{"registry kubexm deploys, create-cluster", registry, "create-cluster", ""},
		{"external registry, rotate-ca", externalRegistry, "rotate-ca", ""},
		{"binary mode, rotate-ca", binary, "rotate-ca", ""},
		{"binary mode, rollback", binary, "rollback", ""},
		{"kubeadm, rollback", stacked, "rollback", "playbook rollback does not support kubernetes.type kubeadm yet: kubexm rollback puts back"},
	} {
		_, _, err := parseWith("c.yaml", []byte(tc.yaml), noEnv, s.ForPlaybook(tc.playbook))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		case tc.want != "" && !strings.Contains(err.Error(), "playbook_choices"):
			t.Errorf("%s: no hint at playbook_choices: %v", tc.name, err)
		}
	}
	// only_with: the refusal applies with that value only, and says so.
	withOnly, err := matrix.ParseSupport("m.yaml", []byte("kubernetes: {minors: [v1.37], default: v1.37.2, skew: {upgrade_max_minors: 1, apiserver_max_minors: 1, kubectl_max_minors: 1}}\n"+
		"playbook_choices: {backup: {spec.kubernetes.type: {only_with: spec.etcd.type=kubexm, kubeadm: {status: not supported yet, reason: a reason}}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"only_with met", kubeadmKubexm, "c.yaml:18:11: spec.kubernetes.type: playbook backup does not support kubernetes.type kubeadm with etcd.type kubexm yet: a reason"},
		{"only_with not met", stacked, ""},
	} {
		_, _, err := parseWith("c.yaml", []byte(tc.yaml), noEnv, withOnly.ForPlaybook("backup"))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	for _, bad := range []struct{ yaml, msg string }{
		{"kubernetes: {minors: [v1.35], default: v1.35.1}\nplaybook_choices: {backup: {spec.etcd.type: {external: {status: supported, tested: x}}}}\n", "list only what playbook backup refuses"},
		{"kubernetes: {minors: [v1.35], default: v1.35.1}\nplaybook_choices: {backup: {spec.etcd.type: {external: {status: not supported yet}}}}\n", "playbook_choices.backup choice spec.etcd.type value external: not supported yet needs a reason"},
		{"kubernetes: {minors: [v1.35], default: v1.35.1}\nplaybook_choices: {backup: [spec.etcd.type]}\n", "playbook_choices.backup: want a mapping"},
	} {
		if _, err := matrix.ParseSupport("m.yaml", []byte(bad.yaml)); err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("%q: %v, want %q", bad.yaml, err, bad.msg)
		}
	}
}

// TestComponentVersionVariable: calico's version is a role variable, not a
// field; one the roles cannot install (off the matrix's lines, or without
// the CRDs file the role applies) is refused before anything runs, at its
// line, from cluster.yaml, group_vars/ and -e alike.
func TestComponentVersionVariable(t *testing.T) {
	for _, tc := range []struct{ version, want string }{
		{"v3.33.0", "calico v3.33.0 is not supported"},
		{"v3.30.4", "calico v3.30.4 is not supported"},
		{"v3.32.2", "calico v3.32.2 is not supported: the roles have no cni/calico/files/calico-crds-v3.32.2.yaml for it"},
		{"3.32.1", "calico 3.32.1 is not supported: the roles have no cni/calico/files/calico-crds-3.32.1.yaml for it"},
	} {
		f := writeClusterWith(t, t.TempDir(), "  roleGroupVars:\n    all:\n      calico_version: "+tc.version+"\n")
		_, _, err := Load(f)
		ps := loadProblems(t, err)
		lines := strings.Count(string(mustRead(t, f)), "\n")
		if len(ps) != 1 || ps[0].Pos.File != f || ps[0].Pos.Line != lines || ps[0].Path != "spec.roleGroupVars.all.calico_version" ||
			ps[0].Message != "role variable calico_version (role artifacts): "+tc.want {
			t.Errorf("%s: want one problem %q at %s:%d, got %v", tc.version, tc.want, f, lines, err)
			continue
		}
		if h := ps[0].Hint; !strings.Contains(h, "this kubexm installs calico v3.31.x, v3.32.x: calico_version v3.31.7 or v3.32.1") || !strings.Contains(h, "leave calico_version out for its default") {
			t.Errorf("%s: hint %q", tc.version, h)
		}
	}
	for _, v := range []string{"v3.31.7", "v3.32.1"} {
		if _, _, err := Load(writeClusterWith(t, t.TempDir(), "  roleGroupVars:\n    all:\n      calico_version: "+v+"\n")); err != nil {
			t.Errorf("%s refused: %v", v, err)
		}
	}

	// group_vars/all.yaml: at that file's line.
	dir := t.TempDir()
	f := writeClusterWith(t, dir, "")
	gv := filepath.Join(dir, "group_vars", "all.yaml")
	if err := os.MkdirAll(filepath.Dir(gv), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gv, []byte("# site\ncalico_version: v3.28.5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := Load(f)
	if ps := loadProblems(t, err); len(ps) != 1 || ps[0].Pos.File != gv || ps[0].Pos.Line != 2 || !strings.Contains(ps[0].Message, "calico v3.28.5 is not supported") {
		t.Errorf("want one problem at %s:2, got %v", gv, err)
	}

	// -e, as a run checks it (lifecycle) against the matrix's declarations.
	s, err := matrix.BuiltinSupport()
	if err != nil {
		t.Fatal(err)
	}
	rv, err := s.RoleVars()
	if err != nil {
		t.Fatal(err)
	}
	if err := rv.CheckExtraVars(map[string]any{"calico_version": "v3.32.9"}); err == nil || !strings.Contains(err.Error(), "-e calico_version: role variable calico_version (role artifacts): calico v3.32.9 is not supported") {
		t.Errorf("-e calico_version=v3.32.9: %v", err)
	}
	if err := rv.CheckExtraVars(map[string]any{"calico_version": "v3.31.7"}); err != nil {
		t.Errorf("-e calico_version=v3.31.7: %v", err)
	}
	// delete removes a calico whatever its version.
	if rv, err := s.ForPlaybook("delete").RoleVars(); err != nil {
		t.Fatal(err)
	} else if err := rv.CheckExtraVars(map[string]any{"calico_version": "v3.28.5"}); err != nil {
		t.Errorf("delete: %v", err)
	}
	// The built-in declarations stay without the matrix's check.
	builtin, err := rolevars.BuiltinRoleVars()
	if err != nil {
		t.Fatal(err)
	}
	if builtin["calico_version"].Versions != nil {
		t.Error("RoleVars changed the shared built-in declarations")
	}

	// A fork whose roles carry the CRDs of another patch installs it.
	fork := s.WithRoles(func(file string) (bool, []string) {
		return file == "cni/calico/files/calico-crds-v3.32.2.yaml", []string{"fork/roles"}
	})
	if rv, err = fork.RoleVars(); err != nil {
		t.Fatal(err)
	}
	if err := rv.CheckExtraVars(map[string]any{"calico_version": "v3.32.2"}); err != nil {
		t.Errorf("the fork's v3.32.2: %v", err)
	}
	if err := rv.CheckExtraVars(map[string]any{"calico_version": "v3.32.1"}); err == nil {
		t.Error("v3.32.1 accepted by a fork without its CRDs")
	}
}
