package eval

import (
	"fmt"
	"regexp"
	"strings"
)

// Hints for the habits of people who write Jinja and Ansible. Each says
// what to write instead, in kubexm's syntax.

// jinjaStmtRe finds a Jinja statement ({% if x %}, {%- for ... -%}), which
// text/template would otherwise print as text.
var jinjaStmtRe = regexp.MustCompile(`\{%-?\s*(if|elif|else|endif|for|endfor|set|raw|endraw|macro|endmacro|block|endblock|with|endwith|filter|endfilter|include|import|from|call)\b[^%]*-?%\}`)

// callRe finds name( : a Jinja-style call with parentheses.
var callRe = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)\s*\(`)

const (
	jinjaStmtHint = " (hint: templates are Go text/template, not Jinja: {{ if .x }}...{{ else }}...{{ end }}, {{ range .list }}...{{ end }})"
	lookupHint    = " (hint: there are no lookup or query plugins; templates read variables: query('inventory_hostnames', 'g') is {{ .groups.g }}, " +
		"and a file or command output on the control machine is read by a task with delegate_to: localhost and register)"
	callHint = " (hint: functions take space-separated arguments without parentheses or commas, and strings take double quotes: " +
		`{{ .x | default "a" }}, not default('a'); {{ .list | join "," }}, not join(',')); see docs/expressions.md)`
)

// jinjaFilters maps Ansible/Jinja filters to what kubexm templates write.
var jinjaFilters = map[string]string{
	"length":        `len: {{ len .x }} or {{ .x | len }}`,
	"count":         `len: {{ len .x }}`,
	"to_yaml":       `toYaml: {{ .x | toYaml }}`,
	"to_nice_yaml":  `toYaml: {{ .x | toYaml }}`,
	"from_yaml":     `fromYaml: {{ .s | fromYaml }}`,
	"to_json":       `toJson: {{ .x | toJson }}`,
	"to_nice_json":  `toPrettyJson: {{ .x | toPrettyJson }}`,
	"from_json":     `fromJson: {{ .s | fromJson }}`,
	"bool":          `a comparison: {{ eq .x true }} (YAML booleans are already booleans)`,
	"regex_replace": `regexReplaceAll: {{ regexReplaceAll "re" .s "new" }}`,
	"regex_search":  `regexFind: {{ regexFind "re" .s }}`,
	"basename":      `base: {{ base .path }}`,
	"dirname":       `dir: {{ dir .path }}`,
	"unique":        `uniq: {{ .list | uniq }}`,
	"b64encode":     `b64enc: {{ .s | b64enc }}`,
	"b64decode":     `b64dec: {{ .s | b64dec }}`,
	"combine":       `merge: {{ merge .override .base }} (the first map wins)`,
	"dict2items":    `range over the map: {{ range $k, $v := .m }}...{{ end }}`,
	"items2dict":    `dict: {{ dict "k" .v }}`,
	"mandatory":     `required: {{ required "x is needed" .x }}`,
	"ternary":       `ternary with the condition last: {{ ternary "yes" "no" .cond }}`,
	"ipaddr":        `cidrHost, cidrContains and ipFamily`,
	"hash":          `sha256sum: {{ .s | sha256sum }}`,
	"password_hash": `a task that runs mkpasswd or openssl passwd with register`,
	"map":           `range: {{ range .list }}{{ .name }} {{ end }}`,
	"selectattr":    `range with if: {{ range .list }}{{ if .enabled }}...{{ end }}{{ end }}`,
	"query":         "",
	"lookup":        "",
}

// jinjaStatement returns the first Jinja statement in s, or "".
func jinjaStatement(s string) string {
	if !strings.Contains(s, "{%") {
		return ""
	}
	return jinjaStmtRe.FindString(s)
}

// jinjaError is the error for a string holding a Jinja statement.
func jinjaError(src, stmt string) error {
	return &Error{Kind: "template", Source: src, Err: fmt.Errorf("%s is Jinja, which kubexm does not run", stmt),
		detail: fmt.Sprintf("%s is a Jinja statement, and kubexm would print it as text", stmt), hint: jinjaStmtHint}
}

// templateHint recognises the mistakes of people used to Jinja in a
// template that failed to parse or run.
func (e *Evaluator) templateHint(src string, err error) string {
	if jinjaStatement(src) != "" {
		return jinjaStmtHint
	}
	msg := err.Error()
	const notDefined = `function "`
	if i := strings.Index(msg, notDefined); i >= 0 && strings.HasSuffix(msg, `" not defined`) {
		name := msg[i+len(notDefined) : len(msg)-len(`" not defined`)]
		if h := jinjaFunctionHint(name); h != "" {
			return h
		}
		if alt := closestKey(e.userFuncs, name); alt != "" {
			return fmt.Sprintf(" (did you mean %q?)", alt)
		}
		if regexp.MustCompile(`\|\s*` + regexp.QuoteMeta(name) + `\b`).MatchString(src) {
			return fmt.Sprintf(" (hint: there is no function %s; templates have text/template's and sprig's functions, listed in docs/expressions.md)", name)
		}
		return fmt.Sprintf(" (hint: variables start with a dot: {{ .%s }})", name)
	}
	if m := callRe.FindStringSubmatch(src); m != nil {
		if h := jinjaFunctionHint(m[1]); h != "" && (m[1] == "query" || m[1] == "lookup") {
			return h
		}
		if strings.Contains(msg, `unexpected "(" in operand`) || strings.Contains(msg, "character constant") ||
			strings.Contains(msg, `unexpected "," in`) || strings.Contains(msg, `unexpected "("`) {
			return callHint
		}
	}
	if strings.Contains(msg, "character constant") {
		return " (hint: strings take double quotes: \"text\")"
	}
	return ""
}

// jinjaFunctionHint is the hint for a Jinja filter or an Ansible lookup
// used as a function, or "".
func jinjaFunctionHint(name string) string {
	alt, ok := jinjaFilters[name]
	switch {
	case !ok:
		return ""
	case name == "query" || name == "lookup":
		return lookupHint
	}
	return fmt.Sprintf(" (hint: Jinja's %s filter is %s)", name, alt)
}
