// Package eval renders the {{ }} templates found in playbook strings and
// evaluates the expressions of when, changed_when, failed_when and until.
//
// Templates are Go text/template with the Masterminds/sprig functions (minus
// env, expandenv and getHostByName: a template must not depend on the
// control machine's environment or resolver) and the kubexm functions
// below (the library, bounded, is engine/eval/funcs). Expressions are
// expr-lang/expr programs run against the variables.
// docs/expressions.md is the user's guide; this comment is the summary.
//
// Undefined variables are errors in both languages, naming the full path
// (`undefined variable "spec.etcd.dataDirr" in template "..."`), never
// "<no value>" or a silent nil. To make that work without losing
// text/template's and expr's own semantics, both parse trees are rewritten
// once, when first compiled: every variable chain (.a.b, $x.a, index .m "k"
// in templates; a.b[c] in expressions) becomes a call to one lookup
// function. Where the user says a value may be missing, the lenient lookup
// returns nil instead: arguments of default, coalesce, empty and required
// (directly or piped) in templates; the left of ?? , ?. chains and
// defined("a.b") in expressions.
//
// A template that is exactly one action ("{{ .groups.etcd }}", spaces
// around allowed) returns its value with its type (list, map, number, bool,
// nil); any other template renders to a string.
//
// Parsed templates and compiled programs are cached by source text, so the
// engine pays parsing once per distinct string, not per host or item.
//
// kubexm functions:
//
//	| function                 | templates | expressions | result                                        |
//	|--------------------------|-----------|-------------|-----------------------------------------------|
//	| toYaml V                 | yes       | yes         | YAML text, no final newline (like Helm)       |
//	| fromYaml S               | yes       | yes         | the decoded value                             |
//	| toJson V                 | sprig     | toJSON      | JSON text                                     |
//	| cidrHost CIDR N          | yes       | yes         | N-th address; negative N counts from the end  |
//	| cidrContains CIDR X      | yes       | yes         | X (address or prefix) is inside CIDR          |
//	| ipFamily X               | yes       | yes         | "IPv4" or "IPv6" for an address or prefix     |
//	| joinHostPort HOST PORT   | yes       | yes         | "10.0.0.1:6443", "[fd00::1]:6443"             |
//	| versionAtLeast V MIN     | yes       | yes         | V >= MIN, "v" prefix and "1.29" allowed       |
//	| semverCompare C V        | sprig     | yes         | V satisfies constraint C (">=1.28 <1.31")     |
//	| indent N S / nindent N S | sprig     | no          | S indented by N spaces (nindent: newline)     |
//	| defined("a.b.c")         | no        | yes         | the path exists; defined("hostvars", h, "ip") |
package eval
