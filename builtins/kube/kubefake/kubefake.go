// Package kubefake is a small in-memory Kubernetes API server for tests of
// the k8s builtin and of the roles that use it: discovery (the built-in
// kinds those tests use, and every CRD applied to it), get, list, server-side
// apply, merge patch (also of status), delete and dry runs, over HTTP, so a
// test goes through client-go as a run does. It is not a real API server:
// an apply merges the applied fields into the stored object (it never
// removes a field), there are no watches (a waiting client reads again),
// and a CRD is Established as soon as it is stored.
package kubefake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"
)

// Kind is one resource the server serves.
type Kind struct {
	Group, Version, Kind, Resource string
	Namespaced                     bool
}

func (k Kind) groupVersion() string {
	if k.Group == "" {
		return k.Version
	}
	return k.Group + "/" + k.Version
}

// Builtin are the kinds served from the start.
var Builtin = []Kind{
	{"", "v1", "Namespace", "namespaces", false},
	{"", "v1", "Node", "nodes", false},
	{"", "v1", "ConfigMap", "configmaps", true},
	{"", "v1", "Secret", "secrets", true},
	{"", "v1", "Service", "services", true},
	{"", "v1", "ServiceAccount", "serviceaccounts", true},
	{"", "v1", "Pod", "pods", true},
	{"rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", false},
	{"rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", false},
	{"rbac.authorization.k8s.io", "v1", "Role", "roles", true},
	{"rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", true},
	{"apps", "v1", "Deployment", "deployments", true},
	{"apps", "v1", "DaemonSet", "daemonsets", true},
	{"apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", false},
}

// Server is the fake API server.
type Server struct {
	*httptest.Server
	mu      sync.Mutex
	kinds   []Kind
	objs    map[string]map[string]any // by path without subresource
	rv      int
	changes int
	calls   []string
}

// New starts a server (plain HTTP on 127.0.0.1); Close stops it.
func New() *Server {
	s := &Server{kinds: append([]Kind(nil), Builtin...), objs: map[string]map[string]any{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Kubeconfig is a kubeconfig that reaches the server.
func (s *Server) Kubeconfig() []byte {
	return []byte(`apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: "` + s.URL + `"}}]
users: [{name: fake, user: {token: fake}}]
contexts: [{name: fake, context: {cluster: fake, user: fake}}]
current-context: fake
`)
}

// Calls are the requests so far, as "METHOD path" with " dry-run" when the
// request was one, and the patch content type for a PATCH.
func (s *Server) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// Writes are the calls that changed something: PATCH and DELETE that were
// not dry runs.
func (s *Server) Writes() []string {
	var out []string
	for _, c := range s.Calls() {
		if (strings.HasPrefix(c, "PATCH ") || strings.HasPrefix(c, "DELETE ")) && !strings.Contains(c, " dry-run") {
			out = append(out, c)
		}
	}
	return out
}

// Changes counts the objects the server stored or deleted (a no-op apply
// or patch stores nothing, as on a real API server).
func (s *Server) Changes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changes
}

// Add stores an object as it is (a Node a kubelet registered, say).
func (s *Server) Add(obj map[string]any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.kindOf(obj)
	if !ok {
		return fmt.Errorf("kind %v is not served", obj["kind"])
	}
	md, _ := obj["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	ns, _ := md["namespace"].(string)
	s.store(objectPath(k, ns, name), obj, k)
	return nil
}

// Get returns a stored object, or nil.
func (s *Server) Get(k Kind, ns, name string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.objs[objectPath(k, ns, name)]
}

func (s *Server) kindOf(obj map[string]any) (Kind, bool) {
	av, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	for _, k := range s.kinds {
		if k.groupVersion() == av && k.Kind == kind {
			return k, true
		}
	}
	return Kind{}, false
}

func objectPath(k Kind, ns, name string) string {
	p := "/apis/" + k.groupVersion()
	if k.Group == "" {
		p = "/api/" + k.Version
	}
	if k.Namespaced {
		p += "/namespaces/" + ns
	}
	p += "/" + k.Resource
	if name != "" {
		p += "/" + name
	}
	return p
}

// store keeps obj at path with the server's bookkeeping; a CRD adds its
// kind and is Established at once.
func (s *Server) store(path string, obj map[string]any, k Kind) {
	s.rv++
	s.changes++
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		obj["metadata"] = md
	}
	md["resourceVersion"] = strconv.Itoa(s.rv)
	if _, ok := md["uid"]; !ok {
		md["uid"] = fmt.Sprintf("uid-%d", s.rv)
	}
	s.objs[path] = obj
	if k.Kind != "CustomResourceDefinition" {
		return
	}
	spec, _ := obj["spec"].(map[string]any)
	names, _ := spec["names"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		nk := Kind{Group: fmt.Sprint(spec["group"]), Version: fmt.Sprint(vm["name"]), Kind: fmt.Sprint(names["kind"]),
			Resource: fmt.Sprint(names["plural"]), Namespaced: spec["scope"] == "Namespaced"}
		if _, ok := s.kindOf(map[string]any{"apiVersion": nk.groupVersion(), "kind": nk.Kind}); !ok {
			s.kinds = append(s.kinds, nk)
		}
	}
	obj["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Established", "status": "True"}}}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	call := r.Method + " " + r.URL.Path
	if r.URL.Query().Get("dryRun") != "" {
		call += " dry-run"
	}
	if r.Method == http.MethodPatch {
		call += " " + r.Header.Get("Content-Type")
	}
	s.calls = append(s.calls, call)
	if r.URL.Query().Get("watch") != "" {
		status(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "no watches here")
		return
	}
	if s.discovery(w, r.URL.Path) {
		return
	}
	k, ns, name, sub, ok := s.parse(r.URL.Path)
	if !ok {
		status(w, http.StatusNotFound, "NotFound", "no such resource "+r.URL.Path)
		return
	}
	path := objectPath(k, ns, name)
	cur := s.objs[path]
	switch {
	case r.Method == http.MethodGet && name == "":
		s.list(w, k, ns, r.URL.Query().Get("labelSelector"))
	case r.Method == http.MethodGet && cur == nil, r.Method == http.MethodDelete && cur == nil:
		status(w, http.StatusNotFound, "NotFound", fmt.Sprintf("%s %q not found", k.Resource, name))
	case r.Method == http.MethodGet:
		reply(w, cur)
	case r.Method == http.MethodDelete:
		if r.URL.Query().Get("dryRun") == "" {
			delete(s.objs, path)
			s.changes++
		}
		reply(w, map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Success"})
	case r.Method == http.MethodPatch:
		s.patch(w, r, k, path, cur, sub)
	default:
		status(w, http.StatusMethodNotAllowed, "MethodNotAllowed", r.Method)
	}
}

func (s *Server) patch(w http.ResponseWriter, r *http.Request, k Kind, path string, cur map[string]any, sub string) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		status(w, http.StatusBadRequest, "BadRequest", err.Error())
		return
	}
	var patch map[string]any
	if err := yaml.Unmarshal(body, &patch); err != nil {
		status(w, http.StatusBadRequest, "BadRequest", err.Error())
		return
	}
	apply := strings.HasPrefix(r.Header.Get("Content-Type"), "application/apply-patch")
	if cur == nil && !apply {
		status(w, http.StatusNotFound, "NotFound", path+" not found")
		return
	}
	out := deepCopy(cur)
	if out == nil {
		out = map[string]any{}
	}
	if sub == "status" {
		patch = map[string]any{"status": patch["status"]}
	} else {
		delete(patch, "status")
	}
	merge(out, patch, !apply)
	if cur != nil && reflect.DeepEqual(out, cur) || r.URL.Query().Get("dryRun") != "" {
		reply(w, out)
		return
	}
	s.store(path, out, k)
	reply(w, out)
}

// merge puts src's fields into dst; with nulls (a merge patch) a null
// removes the field.
func merge(dst, src map[string]any, nulls bool) {
	for key, v := range src {
		if v == nil && nulls {
			delete(dst, key)
			continue
		}
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[key].(map[string]any); ok {
				merge(dm, sm, nulls)
				continue
			}
			dm := map[string]any{}
			merge(dm, sm, nulls)
			dst[key] = dm
			continue
		}
		dst[key] = v
	}
}

func deepCopy(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

func (s *Server) list(w http.ResponseWriter, k Kind, ns, selector string) {
	prefix := objectPath(k, ns, "") + "/"
	var keys []string
	for p := range s.objs {
		if strings.HasPrefix(p, prefix) && !strings.Contains(p[len(prefix):], "/") {
			keys = append(keys, p)
		}
	}
	sort.Strings(keys)
	items := []any{}
	for _, p := range keys {
		if matches(s.objs[p], selector) {
			items = append(items, s.objs[p])
		}
	}
	reply(w, map[string]any{"apiVersion": k.groupVersion(), "kind": k.Kind + "List",
		"metadata": map[string]any{"resourceVersion": strconv.Itoa(s.rv)}, "items": items})
}

// matches takes a selector of key=value terms.
func matches(obj map[string]any, selector string) bool {
	if selector == "" {
		return true
	}
	md, _ := obj["metadata"].(map[string]any)
	labels, _ := md["labels"].(map[string]any)
	for _, term := range strings.Split(selector, ",") {
		k, v, _ := strings.Cut(term, "=")
		if labels[k] != v {
			return false
		}
	}
	return true
}

// parse splits an object path into its kind, namespace, name and
// subresource.
func (s *Server) parse(p string) (k Kind, ns, name, sub string, ok bool) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	var gv string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		gv, parts = parts[1], parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		gv, parts = parts[1]+"/"+parts[2], parts[3:]
	default:
		return k, "", "", "", false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		ns, parts = parts[1], parts[2:]
	}
	for _, c := range s.kinds {
		if c.groupVersion() == gv && c.Resource == parts[0] && c.Namespaced == (ns != "") {
			k, ok = c, true
		}
	}
	if len(parts) > 1 {
		name = parts[1]
	}
	if len(parts) > 2 {
		sub = parts[2]
	}
	return k, ns, name, sub, ok
}

// discovery answers /api, /apis and a group version's resource list.
func (s *Server) discovery(w http.ResponseWriter, p string) bool {
	switch {
	case p == "/api":
		reply(w, map[string]any{"kind": "APIVersions", "versions": []string{"v1"}})
		return true
	case p == "/apis":
		seen := map[string]bool{}
		groups := []any{}
		for _, k := range s.kinds {
			if k.Group == "" || seen[k.groupVersion()] {
				continue
			}
			seen[k.groupVersion()] = true
			gv := map[string]any{"groupVersion": k.groupVersion(), "version": k.Version}
			groups = append(groups, map[string]any{"name": k.Group, "versions": []any{gv}, "preferredVersion": gv})
		}
		reply(w, map[string]any{"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
		return true
	}
	gv := ""
	switch parts := strings.Split(strings.Trim(p, "/"), "/"); {
	case len(parts) == 2 && parts[0] == "api":
		gv = parts[1]
	case len(parts) == 3 && parts[0] == "apis":
		gv = parts[1] + "/" + parts[2]
	default:
		return false
	}
	resources := []any{}
	for _, k := range s.kinds {
		if k.groupVersion() == gv {
			verbs := []string{"get", "list", "patch", "delete"}
			resources = append(resources,
				map[string]any{"name": k.Resource, "kind": k.Kind, "namespaced": k.Namespaced, "verbs": verbs},
				map[string]any{"name": k.Resource + "/status", "kind": k.Kind, "namespaced": k.Namespaced, "verbs": []string{"get", "patch"}})
		}
	}
	reply(w, map[string]any{"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources})
	return true
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func status(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure",
		"reason": reason, "message": msg, "code": code})
}
