// Package funcs is the library of functions a template or an expression may
// call (engine/eval's doc lists kubexm's own): sprig's, without the ones that
// would read the control machine, and kubexm's, each held within the bounds
// of what a template may make (bounds.go), since templates come from
// cluster.yaml and -e values too. It knows no variables: engine/eval rewrites
// the templates and expressions that call it, and adds the functions that
// read them (include, defined).
package funcs

import (
	"text/template"

	"github.com/Masterminds/sprig/v3"
)

// Template returns the functions a template may call: sprig without the
// functions that would read the control machine (its environment, its
// resolver), plus the kubexm functions, the ones that can make much more
// than they are given bounded.
func Template() template.FuncMap {
	fm := sprig.TxtFuncMap()
	for _, name := range []string{"env", "expandenv", "getHostByName"} {
		delete(fm, name)
	}
	fm["toYaml"] = toYAML
	fm["fromYaml"] = fromYAML
	fm["cidrHost"] = cidrHost
	fm["cidrContains"] = cidrContains
	fm["ipFamily"] = ipFamily
	fm["joinHostPort"] = joinHostPort
	fm["shquote"] = shquote
	fm["versionAtLeast"] = versionAtLeast
	fm["mergeConfig"] = mergeConfig
	fm["mergeFlags"] = mergeFlags
	fm["systemdArg"] = systemdArg
	fm["toToml"] = toTOML
	boundedFuncs(fm)
	return fm
}

// Expr returns the kubexm functions an expression may call, by name, in the
// shape expr-lang wants.
func Expr() map[string]func(...any) (any, error) {
	return map[string]func(...any) (any, error){
		"cidrHost":       strAnyFunc("cidrHost", cidrHost),
		"cidrContains":   strFunc2("cidrContains", cidrContains),
		"ipFamily":       strFunc1("ipFamily", ipFamily),
		"joinHostPort":   strAnyFunc("joinHostPort", joinHostPort),
		"semverCompare":  strFunc2("semverCompare", semverCompare),
		"versionAtLeast": strFunc2("versionAtLeast", versionAtLeast),
		"toYaml": func(params ...any) (any, error) {
			if err := exprArgs("toYaml", params, 1); err != nil {
				return nil, err
			}
			return toYAML(params[0])
		},
		"fromYaml": strFunc1("fromYaml", fromYAML),
	}
}
