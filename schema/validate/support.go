package validate

import (
	"github.com/mensylisir/kubexm/schema"
	"github.com/mensylisir/kubexm/schema/matrix"

	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/mensylisir/kubexm/schema/internal/fieldpath"
	"github.com/mensylisir/kubexm/schema/internal/valid"
)

// checkSupport records every choice of c the matrix does not support, as
// problems at the fields that make them (warnings for a warn-only
// playbook).
func checkSupport(s *matrix.Support, c *schema.Cluster, ps *schema.Problems) {
	if s.WarnOnly() {
		found := ps.Fresh()
		checkAll(s, c, found)
		for _, p := range found.List {
			ps.Warnings = append(ps.Warnings, schema.Warning{Pos: p.Pos, Path: p.Path, Message: p.Message + " (ignored: this playbook installs nothing)"})
		}
		return
	}
	checkAll(s, c, ps)
}

func checkAll(s *matrix.Support, c *schema.Cluster, ps *schema.Problems) {
	// Without a load balancer kubexm installs, nodes and clients reach the
	// first master only: say so where several masters suggest HA.
	cpe := &c.Spec.ControlPlaneEndpoint
	if len(c.Spec.RoleGroups.Master) > 1 && cpe.LBAddress == "" && !cpe.ExternalDNS && cpe.InternalLoadbalancer == "" {
		ps.Warn("spec.controlPlaneEndpoint", "%d masters but no load balancer: the control-plane domain resolves to the first master (%s) only; for HA set internalLoadbalancer: haproxy (a local proxy on every worker) or put your load balancer at lb_address (externalLoadBalancer: external)",
			len(c.Spec.RoleGroups.Master), c.Spec.RoleGroups.Master[0])
	}
	checkKubernetes(s, c, ps)
	for _, comp := range s.Components {
		if comp.Field == "" || !applies(s, c, comp.OnlyWith) {
			continue
		}
		for _, m := range resolveField(c, comp.Field) {
			v := m.value.String()
			if v == "" {
				continue
			}
			if !comp.InRelease(v) {
				ps.Add(m.path, fmt.Sprintf("this kubexm installs %s %s; leave the version out for its default", comp.Name, comp.ReleaseLines()),
					"%s %s is not supported", comp.Name, v)
			}
		}
	}
	for i := range s.Choices {
		ch := &s.Choices[i]
		if !applies(s, c, ch.OnlyWith) {
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
				if ch.Value(matrix.ValueUnset) == nil {
					continue
				}
				got = matrix.ValueUnset
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
				v = ch.Value(matrix.ValueOther)
			}
			switch {
			case v == nil:
				ps.Add(m.path, hint, "%s is not in the support matrix (%s)", valueWord(got, ch.Field), s.Source)
			case !v.Supported():
				ps.Add(m.path, hint, "%s is not supported yet: %s", valueWord(got, ch.Field), v.Reason)
			case v.Role != "":
				checkRole(s, c, ch.Field, v, ps)
			}
		}
	}
	checkPlaybookChoices(s, c, ps)
}

// checkPlaybookChoices records the values the playbook the matrix is
// applied for refuses although create-cluster installs them.
func checkPlaybookChoices(s *matrix.Support, c *schema.Cluster, ps *schema.Problems) {
	for i := range s.PlaybookChoices[s.Playbook()] {
		ch := &s.PlaybookChoices[s.Playbook()][i]
		if !applies(s, c, ch.OnlyWith) {
			continue
		}
		for _, m := range resolveField(c, ch.Field) {
			got := choiceValue(m)
			if got == "" {
				got = matrix.ValueUnset
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
			ps.Add(m.path, fmt.Sprintf("the other playbooks accept it; %s lists what each playbook refuses (playbook_choices)", s.Source),
				"playbook %s does not support %s %s%s yet: %s", s.Playbook(), strings.TrimPrefix(ch.Field, "spec."), valueWord(got, ch.Field), with, v.Reason)
		}
	}
}

// checkRole checks that the role a choice names (network.customRole) is in
// the playbook tree, with the task files kubexm includes from it, so a
// missing role fails before any task runs rather than halfway through.
func checkRole(s *matrix.Support, c *schema.Cluster, field string, v *matrix.ChoiceValue, ps *schema.Problems) {
	if s.FindRole() == nil {
		return
	}
	for _, m := range resolveField(c, v.Role) {
		role := strings.Trim(m.value.String(), "/")
		if role == "" {
			ps.Add(m.path, "name the role that installs it", "%s needs a role name", v.Value)
			continue
		}
		for _, f := range []string{"main", "delete"} {
			found, searched := s.FindRole()(role + "/tasks/" + f + ".yaml")
			if !found {
				found, _ = s.FindRole()(role + "/tasks/" + f + ".yml")
			}
			if !found {
				ps.Add(m.path, "create the role in your playbook tree's roles/ or pass its directory with --roles-path; tasks/main.yaml installs, tasks/delete.yaml (may be []) removes",
					"role %q has no tasks/%s.yaml in %s", role, f, strings.Join(searched, ", "))
				return
			}
		}
		ps.Warn(m.path, "%s %s: role %q installs it; kubexm does not check what that role installs", field, v.Value, role)
	}
}

// valueWord names a value in messages: kubeadm, true, "setting addons".
func valueWord(v, field string) string {
	name := strings.TrimSuffix(field[strings.LastIndexByte(field, '.')+1:], "[*]")
	switch v {
	case matrix.ValueSet:
		return "setting " + name
	case matrix.ValueUnset:
		return "leaving " + name + " unset"
	}
	return v
}

// applies reports whether a FIELD=VALUE condition holds and its value is
// itself supported (settings of something not installed are not reported
// twice).
func applies(s *matrix.Support, c *schema.Cluster, cond string) bool {
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

func checkKubernetes(s *matrix.Support, c *schema.Cluster, ps *schema.Problems) {
	const path = "spec.kubernetes.version"
	v := c.Spec.Kubernetes.Version
	minor := valid.MinorOf(v)
	switch {
	case minor == "":
		ps.Add(path, "e.g. "+s.Kubernetes.Default+"; supported "+s.KubernetesRange(), "%q is not a Kubernetes version (vMAJOR.MINOR.PATCH)", v)
		return
	case !slices.Contains(s.Kubernetes.Minors, minor):
		ps.Add(path, "supported: "+s.KubernetesRange(), "Kubernetes %s is not supported by this kubexm", v)
		return
	}
	if tested := s.Kubernetes.TestedPatches[minor]; tested != "" && valid.ComparePatch(v, tested) > 0 {
		ps.Warn(path, "Kubernetes %s is newer than %s, the newest %s patch this kubexm was checked with; the settings of %s are used", v, tested, minor, minor)
	}
	gates := make([]string, 0, len(c.Spec.Kubernetes.FeatureGates))
	for g := range c.Spec.Kubernetes.FeatureGates {
		gates = append(gates, g)
	}
	sort.Strings(gates)
	for _, g := range gates {
		for _, m := range s.Kubernetes.Minors {
			if valid.CompareMinor(m, minor) > 0 {
				if slices.Contains(s.Kubernetes.FeatureGatesAdded[m], g) {
					ps.Add(fieldpath.Key("spec.kubernetes.featureGates", g), fmt.Sprintf("use Kubernetes %s or later, or remove the gate", m),
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
				ps.Add(fieldpath.Key("spec.kubernetes.featureGates", g), "remove it from kubernetes.featureGates",
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
func resolveField(c *schema.Cluster, pattern string) []fieldMatch {
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
		idx, ok := schema.YAMLFields(v.Type())[name]
		if !ok {
			return
		}
		f := v.Field(idx)
		fsf := v.Type().Field(idx)
		p := fieldpath.Child(path, name)
		if !each {
			walk(f, segs[1:], p, fsf)
			return
		}
		switch f.Kind() {
		case reflect.Slice:
			for i := range f.Len() {
				walk(f.Index(i), segs[1:], fieldpath.Index(p, i), fsf)
			}
		case reflect.Map:
			keys := f.MapKeys()
			sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
			for _, k := range keys {
				walk(f.MapIndex(k), segs[1:], fieldpath.Key(p, k.String()), fsf)
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
		if cv, ok := v.Interface().(interface{ MatrixValue() string }); ok {
			return cv.MatrixValue()
		}
		if v.Kind() == reflect.String {
			return v.String()
		}
	}
	if v.Kind() == reflect.Bool {
		return strconv.FormatBool(v.Bool())
	}
	if v.IsZero() || (v.Kind() == reflect.Slice || v.Kind() == reflect.Map) && v.Len() == 0 {
		return matrix.ValueUnset
	}
	return matrix.ValueSet
}
