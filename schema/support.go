package schema

import (
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm"
)

// SupportFile is where the support matrix lives in a playbook tree (the
// embedded one, or a fork written by `kubexm playbook export`).
const SupportFile = "roles/support.yaml"

// Support is the support matrix (roles/support.yaml): which Kubernetes
// versions, component versions and cluster.yaml choices the playbook tree
// it came from installs.
type Support struct {
	Kubernetes KubernetesSupport `json:"kubernetes"`
	Components []Component       `json:"components"`
	Checksums  string            `json:"checksums"`
	Choices    []Choice          `json:"choices"`
	// WarnOnlyPlaybooks install nothing: for them unsupported choices are
	// warnings (see ForPlaybook).
	WarnOnlyPlaybooks []string `json:"warnOnlyPlaybooks"`
	// PlaybookChoices are choices create-cluster installs that one
	// playbook does not handle yet (playbook name -> its refusals, each
	// value "not supported yet"): that playbook refuses them before any
	// task runs (see ForPlaybook).
	PlaybookChoices map[string][]Choice `json:"playbookChoices,omitempty"`
	// Source is the file the matrix was read from, for messages.
	Source string `json:"source"`

	// warnOnly reports unsupported choices as warnings.
	warnOnly bool
	// playbook is the playbook the matrix is applied for (ForPlaybook):
	// its PlaybookChoices are checked too.
	playbook string
	// findRole, when set, tells whether the playbook tree holds a role
	// file (a "role/tasks/main.yaml" path), and names the directories it
	// searched; choices with a role (custom plugins) are checked with it.
	findRole RoleFinder
	// roleVars are the declarations of the tree's role variables; nil
	// is the built-in roles'.
	roleVars RoleVars
}

// RoleFinder reports whether a role file (e.g. "custom-cni/tasks/main.yaml")
// is found in the role directories of a playbook tree, and which
// directories it searched.
type RoleFinder func(file string) (found bool, searched []string)

// WithRoles returns the matrix checking the roles that choices name (a
// custom network plugin's) with find.
func (s *Support) WithRoles(find RoleFinder) *Support {
	c := *s
	c.findRole = find
	return &c
}

// WithRoleVars returns the matrix checking cluster.yaml's variables
// against rv (a fork's roles' declarations).
func (s *Support) WithRoleVars(rv RoleVars) *Support {
	c := *s
	c.roleVars = rv
	return &c
}

// RoleVars returns the declarations cluster.yaml's variables are checked
// against.
func (s *Support) RoleVars() (RoleVars, error) {
	if s.roleVars != nil {
		return s.roleVars, nil
	}
	return BuiltinRoleVars()
}

// ForPlaybook returns the matrix as the playbook named name applies it:
// a playbook that installs nothing (warn_only_playbooks) gets warnings
// instead of errors.
//
// A playbook with entries in PlaybookChoices also refuses those values.
func (s *Support) ForPlaybook(name string) *Support {
	warnOnly := slices.Contains(s.WarnOnlyPlaybooks, name)
	if !warnOnly && len(s.PlaybookChoices[name]) == 0 {
		return s
	}
	c := *s
	c.warnOnly = warnOnly
	c.playbook = name
	return &c
}

// KubernetesSupport is the Kubernetes part of the matrix.
type KubernetesSupport struct {
	Minors []string `yaml:"minors" json:"minors"`
	// TestedPatches is the newest patch of each minor the roles were
	// checked with; newer ones are accepted with a warning.
	TestedPatches map[string]string `yaml:"tested_patches" json:"testedPatches"`
	Default       string            `yaml:"default" json:"default"`
	Mirrors       string            `yaml:"mirrors" json:"mirrors"`
	Skew          VersionSkew       `yaml:"skew" json:"skew"`
	// FeatureGatesRemoved maps a minor to the gates it no longer knows;
	// they are refused for that minor and every later one.
	FeatureGatesRemoved map[string][]string `yaml:"feature_gates_removed" json:"featureGatesRemoved"`
	// FeatureGatesAdded maps a minor to the gates it introduced; older
	// minors refuse them.
	FeatureGatesAdded map[string][]string `yaml:"feature_gates_added" json:"featureGatesAdded"`
}

// VersionSkew holds Kubernetes' version-skew rules, counted in minors, for
// upgrades and nodes joining an existing cluster.
type VersionSkew struct {
	UpgradeMaxMinors           int `yaml:"upgrade_max_minors" json:"upgradeMaxMinors"`
	APIServerMaxMinors         int `yaml:"apiserver_max_minors" json:"apiserverMaxMinors"`
	ControlPlaneMaxOlderMinors int `yaml:"control_plane_max_older_minors" json:"controlPlaneMaxOlderMinors"`
	NodeMaxOlderMinors         int `yaml:"node_max_older_minors" json:"nodeMaxOlderMinors"`
	KubectlMaxMinors           int `yaml:"kubectl_max_minors" json:"kubectlMaxMinors"`
}

// Component is a component's release lines, and where the roles keep its
// exact default version and download URLs ("FILE VARIABLE").
type Component struct {
	// Versions is one release line (v3.6) or several, comma-separated
	// (v3.6, v3.7).
	Name     string `yaml:"name" json:"name"`
	Versions string `yaml:"versions" json:"versions"`
	Field    string `yaml:"field,omitempty" json:"field,omitempty"`
	OnlyWith string `yaml:"only_with,omitempty" json:"onlyWith,omitempty"`
	Default  string `yaml:"default" json:"default"`
	Mirrors  string `yaml:"mirrors" json:"mirrors"`
}

// Choice is one cluster.yaml field and whether each of its values is
// installed.
type Choice struct {
	Field    string        `json:"field"`
	OnlyWith string        `json:"onlyWith,omitempty"`
	Values   []ChoiceValue `json:"values"`
}

// ChoiceValue is one value of a choice.
type ChoiceValue struct {
	Value  string `yaml:"-" json:"value"`
	Status string `yaml:"status" json:"status"`
	Reason string `yaml:"reason,omitempty" json:"reason,omitempty"`
	Tested string `yaml:"tested,omitempty" json:"tested,omitempty"`
	// Role names a field of cluster.yaml holding a role name: the value is
	// installed by that role of the playbook tree (a site's own), which
	// must exist with tasks/main.yaml and tasks/delete.yaml.
	Role string `yaml:"role,omitempty" json:"role,omitempty"`
}

// The statuses a choice value may have.
const (
	StatusSupported    = "supported"
	StatusNotSupported = "not supported yet"
)

// Supported reports whether kubexm installs this value.
func (v ChoiceValue) Supported() bool { return v.Status == StatusSupported }

// The pseudo-values of a choice that is not an enumeration.
const (
	valueUnset = "(unset)"
	valueSet   = "(set)"
	// valueOther stands for every name of a list of names (spec.addons[*])
	// that the matrix does not list.
	valueOther = "(other)"
)

var minorRE = regexp.MustCompile(`^v(\d+)\.(\d+)$`)

// BuiltinSupport returns the matrix of the embedded playbook tree.
func BuiltinSupport() (*Support, error) {
	return ReadSupport(kubexm.Content(), SupportFile, "built-in "+SupportFile)
}

// ReadSupport reads a matrix from fsys; name is used in messages.
func ReadSupport(fsys fs.FS, path, name string) (*Support, error) {
	data, err := fs.ReadFile(fsys, path)
	if err != nil {
		return nil, fmt.Errorf("support matrix: %w", err)
	}
	return ParseSupport(name, data)
}

// ParseSupport parses a support matrix and checks it is coherent.
func ParseSupport(name string, data []byte) (*Support, error) {
	var raw struct {
		Kubernetes KubernetesSupport `yaml:"kubernetes"`
		Components []Component       `yaml:"components"`
		Checksums  string            `yaml:"checksums"`
		Choices    yaml.MapSlice     `yaml:"choices"`
		WarnOnly   []string          `yaml:"warn_only_playbooks"`
		Playbooks  yaml.MapSlice     `yaml:"playbook_choices"`
	}
	if err := yaml.UnmarshalWithOptions(data, &raw, yaml.Strict(), yaml.UseOrderedMap()); err != nil {
		return nil, fmt.Errorf("support matrix %s: %s", name, yaml.FormatError(err, false, true))
	}
	s := &Support{Kubernetes: raw.Kubernetes, Components: raw.Components, Checksums: raw.Checksums, WarnOnlyPlaybooks: raw.WarnOnly, Source: name}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	s.Choices = parseChoices(raw.Choices, "choice ", bad)
	for _, pb := range raw.Playbooks {
		name := fmt.Sprint(pb.Key)
		choices, ok := pb.Value.(yaml.MapSlice)
		if !ok {
			bad("playbook_choices.%s: want a mapping of fields to their refused values", name)
			continue
		}
		if s.PlaybookChoices == nil {
			s.PlaybookChoices = map[string][]Choice{}
		}
		for _, ch := range parseChoices(choices, "playbook_choices."+name+" choice ", bad) {
			for _, v := range ch.Values {
				if v.Supported() {
					bad("playbook_choices.%s choice %s value %s: list only what playbook %s refuses (not supported yet, with a reason)", name, ch.Field, v.Value, name)
				}
			}
			s.PlaybookChoices[name] = append(s.PlaybookChoices[name], ch)
		}
	}
	k := &s.Kubernetes
	if len(k.Minors) == 0 {
		bad("kubernetes.minors is empty")
	}
	for i, m := range k.Minors {
		if !minorRE.MatchString(m) {
			bad("kubernetes.minors: %q is not vMAJOR.MINOR", m)
		} else if i > 0 && compareMinor(k.Minors[i-1], m) >= 0 {
			bad("kubernetes.minors: %s after %s; list them oldest first", m, k.Minors[i-1])
		}
	}
	for m, p := range k.TestedPatches {
		if minorOf(p) != m || !slices.Contains(k.Minors, m) {
			bad("kubernetes.tested_patches: %s: %s is not a patch of one of the minors %v", m, p, k.Minors)
		}
	}
	if !semverish.MatchString(k.Default) || !slices.Contains(k.Minors, minorOf(k.Default)) {
		bad("kubernetes.default %q is not a version of one of the minors %v", k.Default, k.Minors)
	}
	if sk := k.Skew; sk.UpgradeMaxMinors < 1 || sk.APIServerMaxMinors < 1 || sk.ControlPlaneMaxOlderMinors < 0 || sk.NodeMaxOlderMinors < 0 || sk.KubectlMaxMinors < 1 {
		bad("kubernetes.skew: upgrade_max_minors, apiserver_max_minors and kubectl_max_minors must be at least 1, the others not negative")
	}
	for name, gates := range map[string]map[string][]string{"feature_gates_removed": k.FeatureGatesRemoved, "feature_gates_added": k.FeatureGatesAdded} {
		for m := range gates {
			if !slices.Contains(k.Minors, m) {
				bad("kubernetes.%s: %s is not one of the minors %v", name, m, k.Minors)
			}
		}
	}
	for _, c := range s.Components {
		if c.Name == "" || c.Versions == "" {
			bad("components: every entry needs a name and versions")
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("support matrix %s:\n%w", name, err)
	}
	return s, nil
}

// parseChoices reads a mapping of fields to their values' statuses (the
// form of choices: and of each playbook_choices entry); what prefixes the
// problems bad records.
func parseChoices(items yaml.MapSlice, what string, bad func(string, ...any)) []Choice {
	var out []Choice
	for _, item := range items {
		field := fmt.Sprint(item.Key)
		ch := Choice{Field: field}
		values, ok := item.Value.(yaml.MapSlice)
		if !ok {
			bad(what+"%s: want a mapping of values to statuses", field)
			continue
		}
		for _, v := range values {
			key := fmt.Sprint(v.Key)
			if key == "only_with" {
				ch.OnlyWith = fmt.Sprint(v.Value)
				if _, _, ok := strings.Cut(ch.OnlyWith, "="); !ok {
					bad(what+"%s: only_with %q is not FIELD=VALUE", field, ch.OnlyWith)
				}
				continue
			}
			b, err := yaml.Marshal(v.Value)
			if err != nil {
				bad(what+"%s value %s: %v", field, key, err)
				continue
			}
			var cv ChoiceValue
			if err := yaml.UnmarshalWithOptions(b, &cv, yaml.Strict()); err != nil {
				bad(what+"%s value %s: %s", field, key, yaml.FormatError(err, false, false))
				continue
			}
			cv.Value = key
			switch {
			case cv.Status != StatusSupported && cv.Status != StatusNotSupported:
				bad(what+"%s value %s: status %q, want %q or %q", field, key, cv.Status, StatusSupported, StatusNotSupported)
			case cv.Status == StatusNotSupported && cv.Reason == "":
				bad(what+"%s value %s: not supported yet needs a reason", field, key)
			case cv.Status == StatusSupported && cv.Tested == "":
				bad(what+"%s value %s: supported needs tested: what proves it is installed", field, key)
			}
			ch.Values = append(ch.Values, cv)
		}
		out = append(out, ch)
	}
	return out
}

// minorOf returns "v1.37" for "v1.37.2", or "" when v is not vX.Y.Z.
func minorOf(v string) string {
	if !semverish.MatchString(v) {
		return ""
	}
	return v[:strings.LastIndexByte(v, '.')]
}

func compareMinor(a, b string) int {
	pa, pb := minorRE.FindStringSubmatch(a), minorRE.FindStringSubmatch(b)
	if pa == nil || pb == nil {
		return strings.Compare(a, b)
	}
	for i := 1; i <= 2; i++ {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			return x - y
		}
	}
	return 0
}

// comparePatch compares two versions of one minor by their patch numbers.
func comparePatch(a, b string) int {
	x, _ := strconv.Atoi(a[strings.LastIndexByte(a, '.')+1:])
	y, _ := strconv.Atoi(b[strings.LastIndexByte(b, '.')+1:])
	return x - y
}

// KubernetesRange says which Kubernetes versions are supported, for
// messages: "v1.35 to v1.37 (any patch); default v1.37.2".
func (s *Support) KubernetesRange() string {
	m := s.Kubernetes.Minors
	return fmt.Sprintf("%s to %s (any patch); default %s", m[0], m[len(m)-1], s.Kubernetes.Default)
}

// KubernetesVersion normalises a version the user typed (1.37.2, v1.36)
// and checks it against the matrix; a bare minor means the newest patch of
// it the roles were checked with.
func (s *Support) KubernetesVersion(v string) (string, error) {
	v = "v" + strings.TrimPrefix(strings.TrimSpace(v), "v")
	if p := s.Kubernetes.TestedPatches[v]; p != "" {
		return p, nil
	}
	if !semverish.MatchString(v) || !slices.Contains(s.Kubernetes.Minors, minorOf(v)) {
		return "", fmt.Errorf("unsupported Kubernetes version %q: supported %s", v, s.KubernetesRange())
	}
	return v, nil
}

// Choice returns the matrix entry of a field path pattern, or nil.
func (s *Support) Choice(field string) *Choice {
	for i := range s.Choices {
		if s.Choices[i].Field == field {
			return &s.Choices[i]
		}
	}
	return nil
}

// Value returns the entry of one value, or nil.
func (c *Choice) Value(v string) *ChoiceValue {
	for i := range c.Values {
		if c.Values[i].Value == v {
			return &c.Values[i]
		}
	}
	return nil
}

// Supported lists the supported values, for hints.
func (c *Choice) Supported() []string {
	var out []string
	for _, v := range c.Values {
		if v.Supported() {
			out = append(out, v.Value)
		}
	}
	return out
}

// NotSupported lists the values not supported yet.
func (c *Choice) NotSupported() []string {
	var out []string
	for _, v := range c.Values {
		if !v.Supported() {
			out = append(out, v.Value)
		}
	}
	return out
}

// check records every choice of c the matrix does not support, as
// problems at the fields that make them (warnings for a warn-only
// playbook).
func (s *Support) check(c *Cluster, ps *problems) {
	if s.warnOnly {
		found := &problems{src: ps.src}
		s.checkAll(c, found)
		for _, p := range found.list {
			ps.warnings = append(ps.warnings, Warning{Pos: p.Pos, Path: p.Path, Message: p.Message + " (ignored: this playbook installs nothing)"})
		}
		return
	}
	s.checkAll(c, ps)
}

func (s *Support) checkAll(c *Cluster, ps *problems) {
	// Without a load balancer kubexm installs, nodes and clients reach the
	// first master only: say so where several masters suggest HA.
	cpe := &c.Spec.ControlPlaneEndpoint
	if len(c.Spec.RoleGroups.Master) > 1 && cpe.LBAddress == "" && !cpe.ExternalDNS && cpe.InternalLoadbalancer == "" {
		ps.warn("spec.controlPlaneEndpoint", "%d masters but no load balancer: the control-plane domain resolves to the first master (%s) only; for HA set internalLoadbalancer: haproxy (a local proxy on every worker) or put your load balancer at lb_address (externalLoadBalancer: external)",
			len(c.Spec.RoleGroups.Master), c.Spec.RoleGroups.Master[0])
	}
	s.checkKubernetes(c, ps)
	for _, comp := range s.Components {
		if comp.Field == "" || !s.applies(c, comp.OnlyWith) {
			continue
		}
		for _, m := range resolveField(c, comp.Field) {
			v := m.value.String()
			if v == "" {
				continue
			}
			if !comp.InRelease(v) {
				ps.add(m.path, fmt.Sprintf("this kubexm installs %s %s; leave the version out for its default", comp.Name, comp.ReleaseLines()),
					"%s %s is not supported", comp.Name, v)
			}
		}
	}
	for i := range s.Choices {
		ch := &s.Choices[i]
		if !s.applies(c, ch.OnlyWith) {
			continue
		}
		for _, m := range resolveField(c, ch.Field) {
			if enum, ok := m.field.Tag.Lookup("enum"); ok && !slices.Contains(strings.Split(enum, ","), m.value.String()) {
				continue // an invalid value: checkEnums reports it
			}
			got := choiceValue(m)
			if got == "" {
				// An empty enumeration is "not set"; it is checked only
				// when the matrix names that case.
				if ch.Value(valueUnset) == nil {
					continue
				}
				got = valueUnset
			}
			var ok []string
			for _, v := range ch.Supported() {
				ok = append(ok, valueWord(v, ch.Field))
			}
			hint := "supported: " + strings.Join(ok, ", ")
			if len(ok) == 0 {
				hint = "none of its values is installed yet"
			}
			v := ch.Value(got)
			if v == nil && m.field.Tag.Get("choice") == "value" {
				v = ch.Value(valueOther)
			}
			switch {
			case v == nil:
				ps.add(m.path, hint, "%s is not in the support matrix (%s)", valueWord(got, ch.Field), s.Source)
			case !v.Supported():
				ps.add(m.path, hint, "%s is not supported yet: %s", valueWord(got, ch.Field), v.Reason)
			case v.Role != "":
				s.checkRole(c, ch.Field, v, ps)
			}
		}
	}
	s.checkPlaybookChoices(c, ps)
}

// checkPlaybookChoices records the values the playbook the matrix is
// applied for refuses although create-cluster installs them.
func (s *Support) checkPlaybookChoices(c *Cluster, ps *problems) {
	for i := range s.PlaybookChoices[s.playbook] {
		ch := &s.PlaybookChoices[s.playbook][i]
		if !s.applies(c, ch.OnlyWith) {
			continue
		}
		for _, m := range resolveField(c, ch.Field) {
			got := choiceValue(m)
			if got == "" {
				got = valueUnset
			}
			v := ch.Value(got)
			if v == nil {
				continue
			}
			with := ""
			if ch.OnlyWith != "" {
				f, val, _ := strings.Cut(ch.OnlyWith, "=")
				with = fmt.Sprintf(" with %s %s", strings.TrimPrefix(f, "spec."), val)
			}
			ps.add(m.path, fmt.Sprintf("the other playbooks accept it; %s lists what each playbook refuses (playbook_choices)", s.Source),
				"playbook %s does not support %s %s%s yet: %s", s.playbook, strings.TrimPrefix(ch.Field, "spec."), valueWord(got, ch.Field), with, v.Reason)
		}
	}
}

// checkRole checks that the role a choice names (network.customRole) is in
// the playbook tree, with the task files kubexm includes from it, so a
// missing role fails before any task runs rather than halfway through.
func (s *Support) checkRole(c *Cluster, field string, v *ChoiceValue, ps *problems) {
	if s.findRole == nil {
		return
	}
	for _, m := range resolveField(c, v.Role) {
		role := strings.Trim(m.value.String(), "/")
		if role == "" {
			ps.add(m.path, "name the role that installs it", "%s needs a role name", v.Value)
			continue
		}
		for _, f := range []string{"main", "delete"} {
			found, searched := s.findRole(role + "/tasks/" + f + ".yaml")
			if !found {
				found, _ = s.findRole(role + "/tasks/" + f + ".yml")
			}
			if !found {
				ps.add(m.path, "create the role in your playbook tree's roles/ or pass its directory with --roles-path; tasks/main.yaml installs, tasks/delete.yaml (may be []) removes",
					"role %q has no tasks/%s.yaml in %s", role, f, strings.Join(searched, ", "))
				return
			}
		}
		ps.warn(m.path, "%s %s: role %q installs it; kubexm does not check what that role installs", field, v.Value, role)
	}
}

// valueWord names a value in messages: kubeadm, true, "setting addons".
func valueWord(v, field string) string {
	name := strings.TrimSuffix(field[strings.LastIndexByte(field, '.')+1:], "[*]")
	switch v {
	case valueSet:
		return "setting " + name
	case valueUnset:
		return "leaving " + name + " unset"
	}
	return v
}

// applies reports whether a FIELD=VALUE condition holds and its value is
// itself supported (settings of something not installed are not reported
// twice).
func (s *Support) applies(c *Cluster, cond string) bool {
	if cond == "" {
		return true
	}
	field, want, _ := strings.Cut(cond, "=")
	ms := resolveField(c, field)
	if len(ms) != 1 || choiceValue(ms[0]) != want {
		return false
	}
	if ch := s.Choice(field); ch != nil {
		if v := ch.Value(want); v != nil && !v.Supported() {
			return false
		}
	}
	return true
}

// inRelease reports whether version v (v3.6.16, 2.4.2) is on one of the
// release lines (v3.6, 2, or "v3.6, v3.7"): its leading numbers equal the
// line's.
func inRelease(v, lines string) bool {
	v = strings.TrimPrefix(v, "v")
	for _, line := range strings.Split(lines, ",") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "v")
		if v == line || strings.HasPrefix(v, line+".") {
			return true
		}
	}
	return false
}

// InRelease reports whether version v is on one of the component's release
// lines.
func (c Component) InRelease(v string) bool { return inRelease(v, c.Versions) }

// ReleaseLines is the component's release lines as users read them:
// "v3.6.x, v3.7.x".
func (c Component) ReleaseLines() string {
	var out []string
	for _, line := range strings.Split(c.Versions, ",") {
		out = append(out, strings.TrimSpace(line)+".x")
	}
	return strings.Join(out, ", ")
}

func (s *Support) checkKubernetes(c *Cluster, ps *problems) {
	const path = "spec.kubernetes.version"
	v := c.Spec.Kubernetes.Version
	minor := minorOf(v)
	switch {
	case minor == "":
		ps.add(path, "e.g. "+s.Kubernetes.Default+"; supported "+s.KubernetesRange(), "%q is not a Kubernetes version (vMAJOR.MINOR.PATCH)", v)
		return
	case !slices.Contains(s.Kubernetes.Minors, minor):
		ps.add(path, "supported: "+s.KubernetesRange(), "Kubernetes %s is not supported by this kubexm", v)
		return
	}
	if tested := s.Kubernetes.TestedPatches[minor]; tested != "" && comparePatch(v, tested) > 0 {
		ps.warn(path, "Kubernetes %s is newer than %s, the newest %s patch this kubexm was checked with; the settings of %s are used", v, tested, minor, minor)
	}
	gates := make([]string, 0, len(c.Spec.Kubernetes.FeatureGates))
	for g := range c.Spec.Kubernetes.FeatureGates {
		gates = append(gates, g)
	}
	sort.Strings(gates)
	for _, g := range gates {
		for _, m := range s.Kubernetes.Minors {
			if compareMinor(m, minor) > 0 {
				if slices.Contains(s.Kubernetes.FeatureGatesAdded[m], g) {
					ps.add(key("spec.kubernetes.featureGates", g), fmt.Sprintf("use Kubernetes %s or later, or remove the gate", m),
						"feature gate %s was introduced in Kubernetes %s: the components of %s do not know it and refuse to start", g, m, v)
					break
				}
				continue
			}
			if slices.Contains(s.Kubernetes.FeatureGatesRemoved[m], g) {
				when := m
				if m == s.Kubernetes.Minors[0] {
					when += " or earlier"
				}
				ps.add(key("spec.kubernetes.featureGates", g), "remove it from kubernetes.featureGates",
					"feature gate %s was removed in Kubernetes %s: the components of %s refuse to start with it", g, when, v)
				break
			}
		}
	}
}

// fieldMatch is one concrete field a pattern path names.
type fieldMatch struct {
	path  string
	value reflect.Value
	field reflect.StructField
}

// resolveField finds the fields a pattern such as spec.hosts[*].arch names
// in c: one per list element or map entry for [*]. A field inside an absent
// block matches nothing.
func resolveField(c *Cluster, pattern string) []fieldMatch {
	var out []fieldMatch
	var walk func(v reflect.Value, segs []string, path string, sf reflect.StructField)
	walk = func(v reflect.Value, segs []string, path string, sf reflect.StructField) {
		if len(segs) == 0 {
			out = append(out, fieldMatch{path: path, value: v, field: sf})
			return
		}
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return
			}
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct {
			return
		}
		name, each := strings.CutSuffix(segs[0], "[*]")
		idx, ok := yamlFields(v.Type())[name]
		if !ok {
			return
		}
		f := v.Field(idx)
		fsf := v.Type().Field(idx)
		p := child(path, name)
		if !each {
			walk(f, segs[1:], p, fsf)
			return
		}
		switch f.Kind() {
		case reflect.Slice:
			for i := range f.Len() {
				walk(f.Index(i), segs[1:], index(p, i), fsf)
			}
		case reflect.Map:
			keys := f.MapKeys()
			sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
			for _, k := range keys {
				walk(f.MapIndex(k), segs[1:], key(p, k.String()), fsf)
			}
		}
	}
	segs := strings.Split(pattern, ".")
	if len(segs) == 0 || segs[0] != "spec" {
		return nil
	}
	walk(reflect.ValueOf(&c.Spec).Elem(), segs[1:], "spec", reflect.StructField{})
	return out
}

// choiceValue is a field's value as the matrix names it: the string of an
// enumeration ("" when empty: not set, nothing to check), true/false, or
// (set)/(unset).
func choiceValue(m fieldMatch) string {
	v := m.value
	if _, enum := m.field.Tag.Lookup("enum"); enum && v.Kind() == reflect.String {
		return v.String()
	}
	// A list of names (spec.addons[*]): each name is a choice of its own,
	// or what the entry says it is (an add-on from sources).
	if m.field.Tag.Get("choice") == "value" {
		if cv, ok := v.Interface().(interface{ choiceValue() string }); ok {
			return cv.choiceValue()
		}
		if v.Kind() == reflect.String {
			return v.String()
		}
	}
	if v.Kind() == reflect.Bool {
		return strconv.FormatBool(v.Bool())
	}
	if v.IsZero() || (v.Kind() == reflect.Slice || v.Kind() == reflect.Map) && v.Len() == 0 {
		return valueUnset
	}
	return valueSet
}

// WithoutEvidence is s without the tests behind each supported value:
// what a user reads is what is installed, the evidence is for those who
// ask (kubexm support --evidence).
func (s *Support) WithoutEvidence() *Support {
	c := *s
	c.Choices = slices.Clone(s.Choices)
	for i := range c.Choices {
		c.Choices[i].Values = slices.Clone(c.Choices[i].Values)
		for j := range c.Choices[i].Values {
			c.Choices[i].Values[j].Tested = ""
		}
	}
	return &c
}
