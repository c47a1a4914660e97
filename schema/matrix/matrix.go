package matrix

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm"
	"github.com/mensylisir/kubexm/schema/internal/valid"
	"github.com/mensylisir/kubexm/schema/rolevars"
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
	// OSPackageSets say, per package family (deb, rpm), whether an offline
	// bundle carries the OS packages the hosts install (kubexm artifact
	// export) for hosts without a package mirror: not a cluster.yaml
	// choice, so nothing is refused by it here (preflight refuses an
	// offline run the bundle cannot serve).
	OSPackageSets []ChoiceValue `json:"osPackageSets,omitempty"`
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
	roleVars rolevars.RoleVars
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
func (s *Support) WithRoleVars(rv rolevars.RoleVars) *Support {
	c := *s
	c.roleVars = rv
	return &c
}

// RoleVars returns the declarations cluster.yaml's variables and -e are
// checked against, each component's version variable with the matrix's
// check of its versions, except for a playbook that installs nothing
// (delete must remove what an older kubexm installed).
func (s *Support) RoleVars() (rolevars.RoleVars, error) {
	rv := s.roleVars
	if rv == nil {
		var err error
		if rv, err = rolevars.BuiltinRoleVars(); err != nil {
			return nil, err
		}
	}
	if s.warnOnly {
		return rv, nil
	}
	var out rolevars.RoleVars
	for _, c := range s.Components {
		d, ok := rv[c.Variable]
		if c.Variable == "" || !ok {
			continue
		}
		if out == nil {
			out = maps.Clone(rv) // the built-in declarations are shared
		}
		d.Versions = s.versionCheck(c)
		out[c.Variable] = d
	}
	if out == nil {
		return rv, nil
	}
	return out, nil
}

// versionCheck is the check of a component's version variable: on one of
// its release lines, and with the file the roles need for it.
func (s *Support) versionCheck(c Component) func(string) (msg, hint string) {
	return func(v string) (string, string) {
		if c.InRelease(v) && (c.VersionFile == "" || s.hasRoleFile(strings.ReplaceAll(c.VersionFile, versionPlaceholder, v))) {
			return "", ""
		}
		hint := fmt.Sprintf("this kubexm installs %s %s", c.Name, c.ReleaseLines())
		if c.VersionFile != "" {
			hint += fmt.Sprintf(": %s %s (the versions the built-in roles have roles/%s for)", c.Variable, strings.Join(builtinVersions(c.VersionFile), " or "), c.VersionFile)
		}
		hint += fmt.Sprintf("; leave %s out for its default", c.Variable)
		if !c.InRelease(v) {
			return fmt.Sprintf("%s %s is not supported", c.Name, v), hint
		}
		return fmt.Sprintf("%s %s is not supported: the roles have no %s for it", c.Name, v, strings.ReplaceAll(c.VersionFile, versionPlaceholder, v)), hint
	}
}

// hasRoleFile reports whether the playbook tree's roles (WithRoles), else
// the built-in ones, hold file.
func (s *Support) hasRoleFile(file string) bool {
	if s.findRole != nil {
		found, _ := s.findRole(file)
		return found
	}
	_, err := fs.Stat(kubexm.Content(), path.Join("roles", file))
	return err == nil
}

// builtinVersions lists the versions the built-in roles have the file
// pattern (a VersionFile) for, sorted.
func builtinVersions(pattern string) []string {
	before, after, _ := strings.Cut("roles/"+pattern, versionPlaceholder)
	files, err := fs.Glob(kubexm.Content(), before+"*"+after)
	if err != nil {
		return nil // a pattern with glob syntax in it: no list
	}
	var out []string
	for _, f := range files {
		out = append(out, strings.TrimSuffix(strings.TrimPrefix(f, before), after))
	}
	slices.Sort(out)
	return out
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
	// Variable is the role variable choosing the version where no
	// cluster.yaml field does (calico_version): set in cluster.yaml's
	// variables, group_vars/, host_vars/ or with -e, it is checked against
	// Versions as a field is, before any task runs.
	Variable string `yaml:"variable,omitempty" json:"variable,omitempty"`
	// VersionFile is a file the roles need for each version, relative to
	// the roles directory, {version} standing for the version as written
	// (calico's CRDs): a version of Variable without that file is refused
	// too, since the run would stop at it halfway.
	VersionFile string `yaml:"version_file,omitempty" json:"versionFile,omitempty"`
}

// versionPlaceholder stands for the version in Component.VersionFile.
const versionPlaceholder = "{version}"

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
	ValueUnset = "(unset)"
	ValueSet   = "(set)"
	// ValueOther stands for every name of a list of names (spec.addons[*])
	// that the matrix does not list.
	ValueOther = "(other)"
)

// WarnOnly says unsupported choices are warnings (a playbook that installs
// nothing, see ForPlaybook).
func (s *Support) WarnOnly() bool { return s.warnOnly }

// Playbook is the playbook the matrix is applied for (ForPlaybook), whose
// PlaybookChoices are refused too.
func (s *Support) Playbook() string { return s.playbook }

// FindRole is the finder of role files WithRoles set, or nil.
func (s *Support) FindRole() RoleFinder { return s.findRole }

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
		OSPackages yaml.MapSlice     `yaml:"os_package_sets"`
	}
	if err := yaml.UnmarshalWithOptions(data, &raw, yaml.Strict(), yaml.UseOrderedMap()); err != nil {
		return nil, fmt.Errorf("support matrix %s: %s", name, yaml.FormatError(err, false, true))
	}
	s := &Support{Kubernetes: raw.Kubernetes, Components: raw.Components, Checksums: raw.Checksums, WarnOnlyPlaybooks: raw.WarnOnly, Source: name}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	s.Choices = parseChoices(raw.Choices, "choice ", bad)
	for _, item := range raw.OSPackages {
		family := fmt.Sprint(item.Key)
		if cv, ok := parseValue("os_package_sets "+family, family, item.Value, bad); ok {
			if cv.Role != "" {
				bad("os_package_sets %s: role is for choices", family)
			}
			s.OSPackageSets = append(s.OSPackageSets, cv)
		}
	}
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
		if !valid.MinorRE.MatchString(m) {
			bad("kubernetes.minors: %q is not vMAJOR.MINOR", m)
		} else if i > 0 && valid.CompareMinor(k.Minors[i-1], m) >= 0 {
			bad("kubernetes.minors: %s after %s; list them oldest first", m, k.Minors[i-1])
		}
	}
	for m, p := range k.TestedPatches {
		if valid.MinorOf(p) != m || !slices.Contains(k.Minors, m) {
			bad("kubernetes.tested_patches: %s: %s is not a patch of one of the minors %v", m, p, k.Minors)
		}
	}
	if !valid.Semverish.MatchString(k.Default) || !slices.Contains(k.Minors, valid.MinorOf(k.Default)) {
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
		if c.VersionFile != "" && (c.Variable == "" || strings.Count(c.VersionFile, versionPlaceholder) != 1) {
			bad("components: %s: version_file needs variable and one %s in the file name", c.Name, versionPlaceholder)
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
			if cv, ok := parseValue(what+field+" value "+key, key, v.Value, bad); ok {
				ch.Values = append(ch.Values, cv)
			}
		}
		out = append(out, ch)
	}
	return out
}

// parseValue reads one value's status (with its reason or its evidence);
// what names it in the errors.
func parseValue(what, key string, value any, bad func(string, ...any)) (ChoiceValue, bool) {
	b, err := yaml.Marshal(value)
	if err != nil {
		bad("%s: %v", what, err)
		return ChoiceValue{}, false
	}
	var cv ChoiceValue
	if err := yaml.UnmarshalWithOptions(b, &cv, yaml.Strict()); err != nil {
		bad("%s: %s", what, yaml.FormatError(err, false, false))
		return ChoiceValue{}, false
	}
	cv.Value = key
	switch {
	case cv.Status != StatusSupported && cv.Status != StatusNotSupported:
		bad("%s: status %q, want %q or %q", what, cv.Status, StatusSupported, StatusNotSupported)
	case cv.Status == StatusNotSupported && cv.Reason == "":
		bad("%s: not supported yet needs a reason", what)
	case cv.Status == StatusSupported && cv.Tested == "":
		bad("%s: supported needs tested: what proves it is installed", what)
	}
	return cv, true
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
	if !valid.Semverish.MatchString(v) || !slices.Contains(s.Kubernetes.Minors, valid.MinorOf(v)) {
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
	c.OSPackageSets = slices.Clone(s.OSPackageSets)
	for i := range c.OSPackageSets {
		c.OSPackageSets[i].Tested = ""
	}
	return &c
}
