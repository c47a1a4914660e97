package validate

import (
	"fmt"
	"maps"
	"net/url"
	"slices"

	"github.com/mensylisir/kubexm/schema"
	"github.com/mensylisir/kubexm/schema/internal/fieldpath"
)

// registryProxyVar is roles/registry's proxy-cache upstream (a shared
// default of roles/artifacts): the URL the registry kubexm deploys fetches
// what it lacks from.
const registryProxyVar = "registry_proxy_remote_url"

// validateRegistryProxy checks registry_proxy_remote_url wherever
// cluster.yaml sets it: its type (an http(s) URL) is the role variable
// check's; here, what it needs of the rest of the file. The registry
// reaches the upstream with TLS unless that registry's auths entry says
// plainHTTP, serves no path below the URL, and is not its own upstream.
func validateRegistryProxy(c *schema.Cluster, ps *schema.Problems) {
	type setting struct{ path, value string }
	var set []setting
	for _, g := range slices.Sorted(maps.Keys(c.Spec.RoleGroupVars)) {
		if v, ok := c.Spec.RoleGroupVars[g][registryProxyVar].(string); ok && v != "" {
			set = append(set, setting{"spec.roleGroupVars." + g + "." + registryProxyVar, v})
		}
	}
	for i, h := range c.Spec.Hosts {
		if v, ok := h.Vars[registryProxyVar].(string); ok && v != "" {
			set = append(set, setting{fmt.Sprintf("spec.hosts[%d].vars.%s", i, registryProxyVar), v})
		}
	}
	r := &c.Spec.Registry
	for _, s := range set {
		if r.Type != "registry" {
			ps.Warn(s.path, "ignored: registry.type is %q; a proxy cache is the registry kubexm deploys (registry.type registry)", r.Type)
			continue
		}
		u, err := url.Parse(s.value)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			continue // the role variable check says so
		}
		auths := fieldpath.Child("spec.registry", "auths")
		switch {
		case u.Scheme == "http" && !r.Auths[u.Host].PlainHTTP:
			ps.Add(s.path, fmt.Sprintf("use https://%s, or set spec.registry.auths[%q].plainHTTP: true if that registry serves plain HTTP", u.Host, u.Host),
				"the proxy cache's upstream %q is plain HTTP, but %s says nothing of it", s.value, fieldpath.Key(auths, u.Host))
		case u.Scheme == "https" && r.Auths[u.Host].PlainHTTP:
			ps.Add(s.path, fmt.Sprintf("use http://%s, or drop plainHTTP from spec.registry.auths[%q]", u.Host, u.Host),
				"the proxy cache's upstream %q is https://, but %s says plainHTTP", s.value, fieldpath.Key(auths, u.Host))
		case u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "":
			ps.Add(s.path, fmt.Sprintf("the registry's base URL, e.g. %s://%s", u.Scheme, u.Host),
				"the proxy cache's upstream %q has a path: distribution proxies a whole registry (its /v2/ API)", s.value)
		case u.Host == r.PrivateRegistry:
			ps.Add(s.path, "the URL of another registry, the one whose images the nodes should get",
				"the proxy cache's upstream %q is privateRegistry itself", s.value)
		}
	}
}
