package rolevars

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"net/netip"
	"net/url"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm"
	"github.com/mensylisir/kubexm/internal/suggest"
	"github.com/mensylisir/kubexm/schema/internal/valid"
)

// Role variables set in cluster.yaml (vars, roleGroupVars, group_vars/,
// host_vars/) or with -e override the roles' defaults and end up in unit
// files, configuration files and command lines, as spec fields do. Each
// role declares what its variables may hold in meta/main.yaml
// (variables:), Ansible's argument_specs in kubexm's words, and a value a
// declaration does not allow is refused before anything runs.

// VarDecl is one variable a role declares.
type VarDecl struct {
	// Type is str (one line), text (several), int, count (0 or more), bool, list, dict, any,
	// or a rule on a string: path, dir, file, relpath, filename, package, port,
	// duration, url, endpoint, name, label, version, sha256, image, flag, module,
	// host, ip, limit, sysctl.
	Type string `yaml:"type"`
	// Of is a list's item type.
	Of string `yaml:"of,omitempty"`
	// Choices lists the values a str may take.
	Choices []string `yaml:"choices,omitempty"`
	// Spec names the cluster.yaml field the variable follows: the field is
	// where it is set (and validated), never the variable.
	Spec string `yaml:"spec,omitempty"`
	// Internal: the roles compute it from other variables, or a playbook
	// sets it; cluster.yaml does not.
	Internal bool `yaml:"internal,omitempty"`
	// Local: a path on the control machine (a directory of artifacts, a
	// key file, a report), which kubexm server's clients may not name: it
	// is the server's machine.
	Local bool `yaml:"local,omitempty"`
	// Empty: "" (or null) is allowed too, meaning none (no local
	// directory, no checksum, the distribution's list).
	Empty bool `yaml:"empty,omitempty"`
	// ReplacedBy marks a variable the role no longer reads, naming what
	// took its place: a value set for it anywhere is refused, never
	// silently ignored.
	ReplacedBy string `yaml:"replaced_by,omitempty"`

	// Role is the first role declaring it (in path order), for messages.
	Role string `yaml:"-"`
	// Versions, set by the support matrix for a component's version
	// variable (calico_version), says what is wrong with a version the
	// roles do not install (message and hint), or "".
	Versions func(v string) (msg, hint string) `yaml:"-" json:"-"`
}

// RoleVars are the declared variables of a playbook tree's roles, by name.
type RoleVars map[string]VarDecl

// ReadRoleVars reads the declarations of every role under dir of fsys
// (roles/<role>/meta/main.yaml, nested roles such as cni/flannel too).
// A variable several roles declare (kubectl_bin) must be declared alike.
func ReadRoleVars(fsys fs.FS, dir string) (RoleVars, error) {
	out := RoleVars{}
	var errs []error
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || path.Base(p) != "main.yaml" || path.Base(path.Dir(p)) != "meta" {
			return nil
		}
		role := strings.TrimPrefix(path.Dir(path.Dir(p)), dir+"/")
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		decls, err := ParseRoleVars(p, data)
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		for _, name := range slices.Sorted(maps.Keys(decls)) {
			v := decls[name]
			v.Role = role
			if old, ok := out[name]; ok {
				if !sameDecl(old, v) {
					errs = append(errs, fmt.Errorf("%s: variable %s is declared differently by role %s", p, name, old.Role))
				}
				continue
			}
			out[name] = v
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("role variables: %w", err)
	}
	return out, errors.Join(errs...)
}

func sameDecl(a, b VarDecl) bool {
	return a.Type == b.Type && a.Of == b.Of && slices.Equal(a.Choices, b.Choices) && a.Spec == b.Spec && a.Internal == b.Internal && a.Empty == b.Empty && a.Local == b.Local && a.ReplacedBy == b.ReplacedBy
}

// ParseRoleVars reads the variables: section of one meta/main.yaml.
func ParseRoleVars(file string, data []byte) (map[string]VarDecl, error) {
	var meta struct {
		Vars yaml.MapSlice `yaml:"variables"`
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		return nil, fmt.Errorf("%s: %s", file, yaml.FormatError(err, false, true))
	}
	out := map[string]VarDecl{}
	var errs []error
	for _, it := range meta.Vars {
		name := fmt.Sprint(it.Key)
		raw, err := yaml.Marshal(it.Value)
		if err != nil {
			return nil, err
		}
		var d VarDecl
		if err := yaml.UnmarshalWithOptions(raw, &d, yaml.Strict()); err != nil {
			errs = append(errs, fmt.Errorf("%s: variables.%s: %s", file, name, yaml.FormatError(err, false, false)))
			continue
		}
		if _, ok := varTypes[d.Type]; !ok {
			errs = append(errs, fmt.Errorf("%s: variables.%s: unknown type %q; types are %s", file, name, d.Type, strings.Join(slices.Sorted(maps.Keys(varTypes)), ", ")))
			continue
		}
		if _, ok := varTypes[d.Of]; d.Of != "" && (!ok || d.Type != "list") {
			errs = append(errs, fmt.Errorf("%s: variables.%s: of %q: a list's item type, one of the types", file, name, d.Of))
			continue
		}
		out[name] = d
	}
	return out, errors.Join(errs...)
}

var builtinRoleVars = sync.OnceValues(func() (RoleVars, error) { return ReadRoleVars(kubexm.Content(), "roles") })

// BuiltinRoleVars returns the declarations of the built-in roles.
func BuiltinRoleVars() (RoleVars, error) { return builtinRoleVars() }

// Names returns the declared names, sorted.
func (rv RoleVars) Names() []string { return slices.Sorted(maps.Keys(rv)) }

// Check says what is wrong with v as a value of a declared variable set
// from outside the roles (fromCluster: cluster.yaml; else -e), or "".
func (rv RoleVars) Check(name string, v any, fromCluster bool) (msg, hint string) {
	d, ok := rv[name]
	if !ok {
		return "", ""
	}
	who := fmt.Sprintf("role variable %s (role %s)", name, d.Role)
	if d.ReplacedBy != "" {
		return who + " is no longer read", "set " + d.ReplacedBy + " instead"
	}
	if fromCluster && d.Spec != "" {
		return who + " follows " + d.Spec, "set " + d.Spec + " instead, where it is checked as a field"
	}
	if fromCluster && d.Internal {
		return who + " is computed by the roles or set by a playbook", "set the variables or spec fields it is computed from (roles/" + d.Role + "/defaults/main.yaml)"
	}
	if s, ok := v.(string); ok && strings.Contains(s, "{{") {
		return fmt.Sprintf("%s: %q is a template", who, s), templateHint
	}
	if (v == "" || v == nil) && (d.Empty || d.Type == "str" || d.Type == "text") {
		return "", ""
	}
	if m, h := checkVarType(d.Type, d.Of, d.Choices, v); m != "" {
		if valid.SecretVarName.MatchString(name) {
			return who + ": the value is not " + typeNoun(d.Type), h // not echoed
		}
		return who + ": " + m, h
	}
	if s, ok := v.(string); ok && d.Versions != nil {
		if m, h := d.Versions(s); m != "" {
			return who + ": " + m, h
		}
	}
	return "", ""
}

// Probable says which declared variable an undeclared name is a
// probable typo of, or "": one or two edits from a declared name of at
// least 8 characters. Another name is a variable of the user's own
// playbooks and is left alone.
func (rv RoleVars) Probable(name string) string {
	if _, ok := rv[name]; ok || len(name) < 8 {
		return ""
	}
	best, bestD := "", 3
	for _, n := range rv.Names() {
		if d := suggest.Distance(strings.ToLower(name), n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// CheckExtraVars checks -e values against the declarations: a variable no
// role declares is the user's own.
func (rv RoleVars) CheckExtraVars(vars map[string]any) error {
	return rv.checkExtraVars(vars, false)
}

// CheckJobVars checks a kubexm server job's extra vars: as -e, and no
// path on the control machine, which is the server's.
func (rv RoleVars) CheckJobVars(vars map[string]any) error {
	return rv.checkExtraVars(vars, true)
}

func (rv RoleVars) checkExtraVars(vars map[string]any, confined bool) error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		msg, hint := rv.Check(k, vars[k], false)
		if msg == "" && confined {
			msg, hint = rv.CheckLocal(k)
		}
		if msg != "" {
			errs = append(errs, fmt.Errorf("-e %s: %s (%s)", k, msg, hint))
		}
	}
	return errors.Join(errs...)
}

// CheckLocal refuses a variable naming a path on the control machine
// where that machine is kubexm server's.
func (rv RoleVars) CheckLocal(name string) (msg, hint string) {
	d, ok := rv[name]
	if !ok || !d.Local {
		return "", ""
	}
	return fmt.Sprintf("role variable %s (role %s) names a path on the control machine, which is the server's", name, d.Role),
		"kubexm server's clients do not name its files: upload a bundle, or leave the variable to the roles"
}

// BadItem is the index of the first item of a declared list that fails
// its item type, or -1.
func (rv RoleVars) BadItem(name string, v any) int {
	d := rv[name]
	l, ok := v.([]any)
	if !ok || d.Type != "list" || d.Of == "" {
		return -1
	}
	for i, e := range l {
		if m, _ := checkVarType(d.Of, "", nil, e); m != "" {
			return i
		}
	}
	return -1
}

const templateHint = "a role variable is checked before the run, when a template has no value yet: write the value itself"

// varType checks one value; hint says what the type accepts.
type varType struct {
	hint string
	ok   func(v any) bool
}

var (
	durationRE = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h|d|w|y))+$`)
	versionRE  = regexp.MustCompile(`^v?[0-9]+(\.[0-9]+)*([-+][0-9A-Za-z.+-]+)?$`)
	sha256RE   = regexp.MustCompile(`^([0-9a-f]{64})?$`)
	unitNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.@:-]*$`)
	moduleRE   = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	sysctlRE   = regexp.MustCompile(`^[a-z0-9_][a-z0-9_./-]*$`)
	tagRE      = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	imageRE    = regexp.MustCompile(`^([a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?/)?[a-z0-9]+([._-]+[a-z0-9]+)*(/[a-z0-9]+([._-]+[a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$`)
)

var varTypes map[string]varType

func init() {
	str := func(f func(string) bool) func(any) bool {
		return func(v any) bool { s, ok := v.(string); return ok && f(s) }
	}
	varTypes = map[string]varType{
		"any":  {"any value", func(any) bool { return true }},
		"str":  {"one line of text without control characters", func(v any) bool { return isScalarValue(v) && !valid.HasControl(fmt.Sprint(v)) }},
		"text": {"text: lines without control characters other than tabs", str(func(s string) bool { return !valid.HasControl(strings.NewReplacer("\n", "", "\t", "").Replace(s)) })},
		"int":  {"a whole number", func(v any) bool { _, ok := toInt(v); return ok }},
		// A size, a count or a time of a field that refuses negative
		// values (etcd's tuning).
		"count": {"a whole number, 0 or more", func(v any) bool { n, ok := toInt(v); return ok && n >= 0 }},
		"bool": {"true or false", func(v any) bool {
			switch x := v.(type) {
			case bool:
				return true
			case string:
				return x == "true" || x == "false"
			}
			return false
		}},
		"list":    {"a list", func(v any) bool { _, ok := v.([]any); return ok }},
		"dict":    {"a mapping", func(v any) bool { _, ok := asMap(v); return ok }},
		"path":    {"an absolute, normalised path of letters, digits and . _ + @ / -", str(func(s string) bool { m, _ := valid.PathProblem(s, false); return s != "" && m == "" })},
		"dir":     {"an absolute, normalised directory of its own, not a system directory such as /etc, /var or /usr/local/bin", str(func(s string) bool { m, _ := valid.PathProblem(s, true); return s != "" && m == "" })},
		"file":    {"a path, absolute or relative to the current directory, of letters, digits and . _ + @ / -", str(func(s string) bool { return s != "" && valid.PathChars.MatchString(s) && path.Clean(s) == s })},
		"relpath": {"a path relative to the work directory, without ..", str(isRelPath)},
		"filename": {"a file name: letters, digits and . _ + @ -, no /", str(func(s string) bool {
			return s != "." && s != ".." && !strings.Contains(s, "/") && valid.PathChars.MatchString(s)
		})},
		"package": {"a package name: letters, digits, _ . + - (e.g. curl, libc6:amd64), not an option", str(func(s string) bool {
			return valid.DebName.MatchString(s) || valid.RpmName.MatchString(s)
		})},
		"port":     {"a port, 1-65535", func(v any) bool { n, ok := toInt(v); return ok && n >= 1 && n <= 65535 }},
		"duration": {"a duration such as 90s, 5m, 1h30m, 30d or 1y", str(durationRE.MatchString)},
		"url":      {"an http(s) URL without spaces or quotes", str(isHTTPURL)},
		"endpoint": {"unix:///absolute/path.sock or tcp://host:port", str(isEndpoint)},
		"name":     {"a name: letters, digits and _ . @ : - (e.g. a systemd unit)", str(unitNameRE.MatchString)},
		"label":    {"a Kubernetes label key such as node-role.kubernetes.io/worker", str(func(s string) bool { return valid.LabelKeyError(s) == "" })},
		"version":  {"a version such as v1.2.3, 1.2 or 3.6.16-0", str(versionRE.MatchString)},
		"sha256":   {"64 lower-case hex digits, or empty", str(sha256RE.MatchString)},
		"image":    {"an image reference such as registry.k8s.io/pause:3.10", str(imageRE.MatchString)},
		"tag":      {"an image tag: letters, digits, _ . -, at most 128, not starting with . or -", str(tagRE.MatchString)},
		"flag":     {"--flag=value: a lower-case flag name, a value without spaces, quotes, backslashes or $", str(valid.KubeletArg.MatchString)},
		"module":   {"a kernel module name: letters, digits, _ -", str(moduleRE.MatchString)},
		"host":     {"a host name or an IP address", str(valid.IsHostOrIP)},
		"ip":       {"an IP address", str(func(s string) bool { _, err := netip.ParseAddr(s); return err == nil })},
		// keepalived's advert_int (VRRPv3 counts in centiseconds).
		"seconds": {"a positive number of seconds with at most 2 decimals, such as 1 or 0.5", func(v any) bool {
			f, ok := toSeconds(v)
			return ok && f > 0 && f < 1e6 && math.Abs(f*100-math.Round(f*100)) < 1e-9
		}},
		"limit": {"a number or infinity", func(v any) bool {
			_, ok := toInt(v)
			return ok || v == "infinity"
		}},
		"sysctl": {"{name: a sysctl key such as net.ipv4.ip_forward, value: one line}", func(v any) bool {
			m, ok := asMap(v)
			if !ok || len(m) != 2 {
				return false
			}
			n, _ := m["name"].(string)
			val, has := m["value"]
			return sysctlRE.MatchString(n) && has && isScalarValue(val) && !valid.HasControl(fmt.Sprint(val))
		}},
	}
}

// checkVarType checks v against a type (and a list's items, a str's
// choices).
func checkVarType(typ, of string, choices []string, v any) (msg, hint string) {
	if s, ok := v.(string); ok && typ != "any" && strings.Contains(s, "{{") {
		return fmt.Sprintf("%q is a template", s), templateHint
	}
	t := varTypes[typ]
	if !t.ok(v) {
		if s, isStr := v.(string); isStr {
			if typ == "package" && strings.HasPrefix(s, "-") {
				return fmt.Sprintf("%q is an option, not a package name", s), t.hint
			}
			if m, h := valid.PathProblem(s, typ == "dir"); (typ == "path" || typ == "dir") && m != "" {
				return m, h
			}
			return fmt.Sprintf("%q is not %s", s, typeNoun(typ)), t.hint
		}
		return fmt.Sprintf("%s is not %s", describe(v), typeNoun(typ)), t.hint
	}
	if len(choices) > 0 && !slices.Contains(choices, fmt.Sprint(v)) {
		return fmt.Sprintf("%q is not one of %s", fmt.Sprint(v), strings.Join(choices, ", ")), strings.TrimSpace("one of " + strings.Join(choices, ", ") + "; " + suggest.DidYouMean(fmt.Sprint(v), choices))
	}
	if typ == "list" && of != "" {
		for i, e := range v.([]any) {
			if m, h := checkVarType(of, "", nil, e); m != "" {
				return fmt.Sprintf("item %d: %s", i+1, m), h
			}
		}
	}
	return "", ""
}

func typeNoun(t string) string {
	switch t {
	case "str":
		return "one line of text"
	case "int":
		return "a whole number"
	case "seconds":
		return "a number of seconds"
	case "bool":
		return "true or false"
	case "list", "dict":
		return "a " + map[string]string{"list": "list", "dict": "mapping"}[t]
	}
	return "a valid " + t
}

func describe(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	case nil:
		return "null"
	}
	if _, ok := asMap(v); ok {
		return "a mapping"
	}
	return fmt.Sprintf("%v", v)
}

func isScalarValue(v any) bool {
	switch v.(type) {
	case string, bool, int, int64, uint64, float64:
		return true
	}
	return false
}

// asMap is v as a mapping: map[string]any, or a type of that kind
// (schema.VarMap).
func asMap(v any) (map[string]any, bool) {
	if m, ok := v.(map[string]any); ok {
		return m, true
	}
	mapType := reflect.TypeFor[map[string]any]()
	if rv := reflect.ValueOf(v); rv.IsValid() && rv.Type().ConvertibleTo(mapType) && rv.Kind() == reflect.Map {
		return rv.Convert(mapType).Interface().(map[string]any), true
	}
	return nil, false
}

func toInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case uint64:
		return int64(x), x <= math.MaxInt64
	case float64:
		return int64(x), x == math.Trunc(x) && math.Abs(x) < 1<<53
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	}
	return 0, false
}

// toSeconds reads a number: an int, a float or its decimal text.
func toSeconds(v any) (float64, bool) {
	if n, ok := toInt(v); ok {
		return float64(n), true
	}
	switch x := v.(type) {
	case float64:
		return x, !math.IsNaN(x) && !math.IsInf(x, 0)
	case string:
		// Decimal text only: the value is written as given.
		if !decimalRE.MatchString(x) {
			return 0, false
		}
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil
	}
	return 0, false
}

var decimalRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

func isRelPath(s string) bool {
	return s != "" && !strings.HasPrefix(s, "/") && valid.PathChars.MatchString(s) && path.Clean(s) == s && s != ".." && !strings.HasPrefix(s, "../")
}

func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil &&
		!valid.HasControl(s) && !strings.ContainsAny(s, " \"'\\`$")
}

func isEndpoint(s string) bool {
	if p, ok := strings.CutPrefix(s, "unix://"); ok {
		m, _ := valid.PathProblem(p, false)
		return m == ""
	}
	if hp, ok := strings.CutPrefix(s, "tcp://"); ok {
		return valid.IsHostPort(hp)
	}
	return false
}

// RoleVarsMarkdown is the table of a role's variables that its README
// carries, in the order meta/main.yaml declares them.
func RoleVarsMarkdown(file string, meta []byte) (string, error) {
	decls, err := ParseRoleVars(file, meta)
	if err != nil {
		return "", err
	}
	var order struct {
		Vars yaml.MapSlice `yaml:"variables"`
	}
	if err := yaml.Unmarshal(meta, &order); err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	var b strings.Builder
	b.WriteString("| Variable | Value | Set by |\n|---|---|---|\n")
	for _, it := range order.Vars {
		name := fmt.Sprint(it.Key)
		d := decls[name]
		typ := d.Type
		if d.Of != "" {
			typ = "list of " + d.Of
		}
		if len(d.Choices) > 0 {
			typ += ": " + strings.Join(d.Choices, ", ")
		}
		if d.Empty {
			typ += ", or empty"
		}
		if d.Local {
			typ += ", on the control machine (not through kubexm server)"
		}
		who := "cluster.yaml or -e"
		switch {
		case d.Spec != "":
			who = "`" + d.Spec + "` (-e overrides)"
		case d.Internal:
			who = "the roles or a playbook (-e overrides)"
		}
		if d.ReplacedBy != "" {
			typ, who = "no longer read", "refused: set "+d.ReplacedBy+" instead"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", name, typ, who)
	}
	return b.String(), nil
}
