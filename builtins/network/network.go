// Package network provides the builtins that check what a host reaches:
// wait_for (a port, a path or an HTTP answer), uri (an HTTP request) and
// dns_query.
package network

import "github.com/mensylisir/kubexm/engine/step"

// Builtins returns the network builtins.
func Builtins() []step.Builtin {
	return []step.Builtin{waitForBuiltin{}, uriBuiltin{}, dnsQueryBuiltin{}}
}
