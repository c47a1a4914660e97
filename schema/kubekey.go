package schema

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/mensylisir/kubexm/internal/suggest"
	"github.com/mensylisir/kubexm/internal/ytree"
	"github.com/mensylisir/kubexm/schema/internal/fieldpath"
)

// KubeKeyAPIVersion is the apiVersion of KubeKey v3 cluster files, which
// kubexm reads by converting them.
const KubeKeyAPIVersion = "kubekey.kubesphere.io/v1alpha2"

// kubekeyConversion records what converting a KubeKey file changed, for the
// one warning that lists it.
type kubekeyConversion struct {
	renamed []string
	dropped []string
}

func (kc *kubekeyConversion) rename(from, to string) {
	kc.renamed = append(kc.renamed, from+" -> "+to)
}

func (kc *kubekeyConversion) drop(path, why string) {
	if why != "" {
		path += " (" + why + ")"
	}
	kc.dropped = append(kc.dropped, path)
}

// convertKubeKey rewrites a KubeKey v3 tree into the kubexm form in place,
// keeping every node's position so later errors still point into the
// user's file.
func convertKubeKey(root *ytree.Node, ps *Problems) {
	kc := &kubekeyConversion{}
	av := root.Index("apiVersion")
	avPos := root.Keys[av].Pos
	root.Vals[av] = strNode(APIVersion, root.Vals[av].TokPos)
	kc.rename("apiVersion "+KubeKeyAPIVersion, APIVersion)

	spec := mapAt(root, "spec")
	warnKubeKeyDefaults(root, spec, ps)
	if spec != nil {
		kubekeyKubernetesType(spec, kc)
		kubekeyStorage(spec, kc)
		convertKubeKeySpec(spec, kc)
		kubekeyDNS(spec, kc, ps)
		kubekeyComponentArgs(spec, kc, ps)
	}
	checkKubeKeyKeys(root, reflect.TypeFor[Cluster](), "", kc, ps)

	var b strings.Builder
	b.WriteString("converted from KubeKey v3 (" + KubeKeyAPIVersion + "); run `kubexm config convert` to save the kubexm form")
	if len(kc.renamed) > 0 {
		b.WriteString("\n  renamed: " + strings.Join(kc.renamed, "\n  renamed: "))
	}
	if len(kc.dropped) > 0 {
		b.WriteString("\n  dropped: " + strings.Join(kc.dropped, "\n  dropped: "))
	}
	ps.Warnings = append(ps.Warnings, Warning{Pos: avPos, Path: "apiVersion", Message: b.String()})
}

func convertKubeKeySpec(spec *ytree.Node, kc *kubekeyConversion) {
	if rg := mapAt(spec, "roleGroups"); rg != nil {
		moveKey(rg, "control-plane", rg, "master", "spec.roleGroups.control-plane", "spec.roleGroups.master", kc)
	}
	if cpe := mapAt(spec, "controlPlaneEndpoint"); cpe != nil {
		moveKey(cpe, "address", cpe, "lb_address", "spec.controlPlaneEndpoint.address", "spec.controlPlaneEndpoint.lb_address", kc)
	}
	runtime := "containerd"
	if k := mapAt(spec, "kubernetes"); k != nil {
		if i := k.Index("containerManager"); i >= 0 && isScalar(k.Vals[i]) {
			runtime = k.Vals[i].Text
			if runtime == "crio" {
				runtime = "cri-o"
				k.Vals[i] = strNode(runtime, k.Vals[i].TokPos)
			}
			cr := ensureMap(k, "containerRuntime", k.Keys[i].Pos)
			moveKey(k, "containerManager", cr, "type", "spec.kubernetes.containerManager", "spec.kubernetes.containerRuntime.type", kc)
		}
	}
	if e := mapAt(spec, "etcd"); e != nil {
		if i := e.Index("type"); i >= 0 && isScalar(e.Vals[i]) && e.Vals[i].Text == "kubekey" {
			e.Vals[i] = strNode("kubexm", e.Vals[i].TokPos)
			kc.rename("spec.etcd.type kubekey", "kubexm")
		}
	}
	if r := mapAt(spec, "registry"); r != nil {
		blockKey := strings.ReplaceAll(runtime, "cri-o", "crio")
		for _, f := range []string{"registryMirrors", "insecureRegistries"} {
			i := r.Index(f)
			if i < 0 {
				continue
			}
			at := r.Keys[i].Pos
			k := ensureMap(spec, "kubernetes", at)
			cr := ensureMap(k, "containerRuntime", at)
			block := ensureMap(cr, blockKey, at)
			moveKey(r, f, block, f, "spec.registry."+f, "spec.kubernetes.containerRuntime."+blockKey+"."+f, kc)
		}
		if t := r.Get("type"); isScalar(t) && t.Text == "" {
			removeKey(r, "type")
		}
	}
}

// checkKubeKeyKeys removes from a KubeKey tree the keys kubexm's types do
// not have. A KubeKey field without a kubexm equivalent is dropped with a
// note when its value asks for nothing (KubeKey's default, false, empty),
// and refused with its reason otherwise: accepting it would build another
// cluster than the file describes. Any other key is a typo, refused with
// the closest field name.
func checkKubeKeyKeys(n *ytree.Node, t reflect.Type, path string, kc *kubekeyConversion, ps *Problems) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != ytree.Map {
			return
		}
		fields := YAMLFields(t)
		known := kubekeyOnlyFields()
		var keys, vals []*ytree.Node
		for i, k := range n.Keys {
			p := fieldpath.Child(path, k.Text)
			if idx, ok := fields[k.Text]; ok {
				checkKubeKeyKeys(n.Vals[i], t.Field(idx).Type, p, kc, ps)
				keys, vals = append(keys, k), append(vals, n.Vals[i])
				continue
			}
			pattern := anyIndex(p)
			if f, ok := known[pattern]; ok {
				if f.inert(n.Vals[i]) {
					kc.drop(p, "KubeKey's "+f.what+"; as written it asks for nothing")
					continue
				}
				ps.List = append(ps.List, Problem{Pos: k.Pos, Path: p, Message: "KubeKey's " + f.what + " has no kubexm equivalent", Hint: f.reason})
				continue
			}
			ps.List = append(ps.List, Problem{Pos: k.Pos, Path: p, Message: "unknown field", Hint: kubekeyHint(k.Text, fields, known, pattern)})
		}
		n.Keys, n.Vals = keys, vals
	case reflect.Slice:
		if n.Kind == ytree.List {
			for i, it := range n.List {
				checkKubeKeyKeys(it, t.Elem(), fieldpath.Index(path, i), kc, ps)
			}
		}
	case reflect.Map:
		if n.Kind == ytree.Map {
			for i, k := range n.Keys {
				checkKubeKeyKeys(n.Vals[i], t.Elem(), fieldpath.Key(path, k.Text), kc, ps)
			}
		}
	}
}

// anyIndex writes a path's list indices as [*]: spec.hosts[3].timeout is
// spec.hosts[*].timeout.
func anyIndex(p string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(p, '[')
		if i < 0 {
			b.WriteString(p)
			return b.String()
		}
		j := strings.IndexByte(p[i:], ']') + i
		if j < i || strings.Trim(p[i+1:j], "0123456789") != "" {
			b.WriteString(p)
			return b.String()
		}
		b.WriteString(p[:i] + "[*]")
		p = p[j+1:]
	}
}

// kubekeyHint suggests the closest kubexm or KubeKey key of the same
// mapping for a key neither has.
func kubekeyHint(got string, fields map[string]int, known map[string]kubekeyField, pattern string) string {
	parent := pattern[:max(0, strings.LastIndexByte(pattern, '.'))]
	var names []string
	for f := range fields {
		names = append(names, f)
	}
	for p := range known {
		if i := strings.LastIndexByte(p, '.'); i > 0 && p[:i] == parent {
			names = append(names, p[i+1:])
		}
	}
	slices.Sort(names)
	if h := suggest.DidYouMean(got, names); h != "" {
		return h
	}
	return "neither kubexm nor KubeKey v3 has this field here; kubexm explain " + parent + " lists kubexm's"
}

// kubekeyField is a KubeKey v3 field kubexm has no equivalent of.
type kubekeyField struct {
	what   string // what it is in KubeKey
	reason string // why kubexm refuses it, and what to do instead
	def    string // KubeKey's default as written, which asks for nothing either
}

// inert says whether v asks KubeKey for nothing: unset, false, zero, empty,
// the default, or a mapping of such values ({enabled: false}).
func (f kubekeyField) inert(v *ytree.Node) bool {
	switch {
	case v.IsNull():
		return true
	case v.Kind == ytree.List:
		return len(v.List) == 0
	case v.Kind == ytree.Map:
		for _, x := range v.Vals {
			if !(kubekeyField{def: f.def}).inert(x) {
				return false
			}
		}
		return true
	}
	switch v.Scalar {
	case false, 0, "":
		return true
	}
	return f.def != "" && v.Text == f.def
}

// kubekeyOnlyFields lists the KubeKey v3 (v1alpha2) Cluster fields that
// kubexm has no field or variable of the same meaning for, by path
// ([*] for any list index).
func kubekeyOnlyFields() map[string]kubekeyField {
	script := "script run on the nodes"
	hook := "write it as a hook playbook (spec.hooks, docs/playbooks.md#hooks): a task running the script, before phase os or after phase health"
	return map[string]kubekeyField{
		"spec.hosts[*].privateKey":                 {what: "inline SSH private key", reason: "kubexm reads keys from files: write the key to a file only you can read and set privateKeyPath"},
		"spec.hosts[*].timeout":                    {what: "SSH timeout", reason: "kubexm's SSH timeouts are fixed; remove it", def: "30"},
		"spec.controlPlaneEndpoint.kubevip":        {what: "kube-vip mode", reason: "kube-vip is not installed by kubexm (see kubexm support)", def: "ARP"},
		"spec.system.preInstall":                   {what: script + " before installing", reason: hook},
		"spec.system.postInstall":                  {what: script + " after installing", reason: hook},
		"spec.system.postClusterInstall":           {what: script + " after the cluster is up", reason: hook},
		"spec.system.skipConfigureOS":              {what: "switch to leave the OS unprepared", reason: "kubexm prepares the OS it installs on; run without it by --skip-tags os"},
		"spec.kubernetes.imageRepo":                {what: "image repository", reason: "set registry.privateRegistry and registry.namespaceOverride"},
		"spec.kubernetes.disableKubeProxy":         {what: "switch to install no kube-proxy", reason: "kubexm always installs kube-proxy"},
		"spec.kubernetes.containerRuntimeEndpoint": {what: "CRI socket", reason: "kubexm sets the socket of the runtime it installs; a runtime of your own is containerRuntime.type custom with kubelet_container_runtime_endpoint"},
		"spec.kubernetes.nodeFeatureDiscovery":     {what: "node-feature-discovery add-on", reason: "kubexm does not install it; install it as an add-on of your own (spec.addons, a chart)"},
		"spec.kubernetes.kata":                     {what: "Kata Containers add-on", reason: "kubexm does not install Kata Containers"},
		"spec.kubernetes.audit":                    {what: "API server audit switch", reason: "set the audit flags with kube_apiserver_extra_config (docs/playbooks.md, extension points)"},
		"spec.kubernetes.kubeProxyArgs":            {what: "kube-proxy command-line flags", reason: "kubexm configures kube-proxy by its configuration file: set the same settings as KubeProxyConfiguration fields in kubernetes.kubeProxyConfiguration"},
		"spec.etcd.port":                           {what: "etcd client port", reason: "kubexm's etcd listens on 2379", def: "2379"},
		"spec.etcd.peerPort":                       {what: "etcd peer port", reason: "kubexm's etcd peers use 2380", def: "2380"},
		"spec.etcd.backupScript":                   {what: "directory of the etcd backup script", reason: "kubexm's backups are a systemd timer (etcd.backupPeriod); remove it", def: "/usr/local/bin/kube-scripts"},
		"spec.network.calico.ipv4NatOutgoing":      {what: "calico NAT switch", reason: "kubexm's calico role keeps calico's own pool setting and has no switch for it"},
		"spec.network.calico.defaultIPPOOL":        {what: "calico default pool switch", reason: "kubexm's calico role always creates its pool from kubePodsCIDR and ippool.blockSize", def: "true"},
		"spec.network.flannel.directRouting":       {what: "flannel direct routing", reason: "use flannel.backendMode host-gw for routes between nodes"},
		"spec.network.kubeovn":                     {what: "Kube-OVN settings", reason: "kubexm does not install Kube-OVN"},
		"spec.network.multusCNI":                   {what: "Multus add-on", reason: "kubexm does not install Multus; install it as an add-on of your own (spec.addons)"},
		"spec.registry.dataRoot":                   {what: "docker data root", reason: "set registry.dockerDataDir"},
		"spec.registry.bridgeIP":                   {what: "docker bridge address", reason: "kubexm does not install docker"},
		"spec.registry.namespaceRewrite":           {what: "image namespace rewrite", reason: "set registry.namespaceOverride"},
		"spec.kubesphere":                          {what: "KubeSphere switch", reason: "kubexm does not install KubeSphere; install it on the finished cluster with ks-installer or its Helm chart"},
	}
}

func mapAt(n *ytree.Node, k string) *ytree.Node {
	if v := n.Get(k); v != nil && v.Kind == ytree.Map {
		return v
	}
	return nil
}

// ensureMap returns the mapping under k, creating it (positioned at pos)
// when absent or null.
func ensureMap(n *ytree.Node, k string, pos Pos) *ytree.Node {
	if i := n.Index(k); i >= 0 {
		if n.Vals[i].Kind != ytree.Map {
			n.Vals[i] = &ytree.Node{Kind: ytree.Map, Pos: pos, TokPos: pos}
		}
		return n.Vals[i]
	}
	m := &ytree.Node{Kind: ytree.Map, Pos: pos, TokPos: pos}
	n.Keys, n.Vals = append(n.Keys, strNode(k, pos)), append(n.Vals, m)
	return m
}

// removeKey removes k from a mapping and returns its key and value nodes,
// or nils.
func removeKey(n *ytree.Node, k string) (key, val *ytree.Node) {
	i := n.Index(k)
	if i < 0 {
		return nil, nil
	}
	key, val = n.Keys[i], n.Vals[i]
	n.Keys = append(n.Keys[:i], n.Keys[i+1:]...)
	n.Vals = append(n.Vals[:i], n.Vals[i+1:]...)
	return key, val
}

// moveKey moves from[fk] to to[tk]. When both exist and are lists they are
// joined (KubeKey allowed master and control-plane side by side).
func moveKey(from *ytree.Node, fk string, to *ytree.Node, tk, fromPath, toPath string, kc *kubekeyConversion) {
	fkey, fval := removeKey(from, fk)
	if fkey == nil {
		return
	}
	kc.rename(fromPath, toPath)
	if i := to.Index(tk); i >= 0 {
		if old := to.Vals[i]; old.Kind == ytree.List && fval.Kind == ytree.List {
			to.Vals[i] = &ytree.Node{Kind: ytree.List, Pos: old.Pos, TokPos: old.TokPos, List: append(append([]*ytree.Node{}, old.List...), fval.List...)}
			return
		}
		kc.drop(fromPath, toPath+" is also set")
		return
	}
	to.Keys, to.Vals = append(to.Keys, strNode(tk, fkey.Pos)), append(to.Vals, fval)
}

// kubekeyDNS maps KubeKey's DNS switches. kubernetes.dnsDomain is kubexm's
// clusterName (the DNS domain); KubeKey's clusterName is the cluster's
// name, which kubexm takes from metadata.name, so it converts only when it
// is the domain too (KubeKey's default file: cluster.local both).
// kubernetes.nodelocaldns becomes dns.nodelocaldns.enabled.
func kubekeyDNS(spec *ytree.Node, kc *kubekeyConversion, ps *Problems) {
	k := mapAt(spec, "kubernetes")
	if k == nil {
		return
	}
	domain := "cluster.local"
	dk, dv := removeKey(k, "dnsDomain")
	if dk != nil && isScalar(dv) {
		domain = dv.Text
	}
	if i := k.Index("clusterName"); i >= 0 && isScalar(k.Vals[i]) && k.Vals[i].Text != domain {
		ps.List = append(ps.List, Problem{Pos: k.Keys[i].Pos, Path: "spec.kubernetes.clusterName",
			Message: fmt.Sprintf("KubeKey's clusterName %q names the cluster, while its DNS domain is %q; kubexm's clusterName is the DNS domain", k.Vals[i].Text, domain),
			Hint:    fmt.Sprintf("remove clusterName (kubexm names the cluster metadata.name) or set it to %q", domain)})
		removeKey(k, "clusterName")
	}
	if dk != nil {
		removeKey(k, "clusterName")
		k.Keys, k.Vals = append(k.Keys, strNode("clusterName", dk.Pos)), append(k.Vals, dv)
		kc.rename("spec.kubernetes.dnsDomain", "spec.kubernetes.clusterName")
	}
	nk, nv := removeKey(k, "nodelocaldns")
	if nk == nil || nv.IsNull() {
		return
	}
	on, ok := nv.Scalar.(bool)
	if !ok {
		ps.List = append(ps.List, Problem{Pos: nv.TokPos, Path: "spec.kubernetes.nodelocaldns", Message: "expected a boolean, got " + nv.KindName()})
		return
	}
	d := ensureMap(spec, "dns", nk.Pos)
	if !on && d.Index("nodelocaldns") < 0 {
		kc.rename("spec.kubernetes.nodelocaldns false", "no spec.dns.nodelocaldns (off)")
		return
	}
	nl := ensureMap(d, "nodelocaldns", nk.Pos)
	removeKey(nl, "enabled")
	nl.Keys, nl.Vals = append(nl.Keys, strNode("enabled", nk.Pos)), append(nl.Vals, &ytree.Node{Pos: nv.Pos, TokPos: nv.TokPos, Scalar: on, Text: nv.Text})
	kc.rename("spec.kubernetes.nodelocaldns", "spec.dns.nodelocaldns.enabled")
}

// kubekeyComponentArgs maps KubeKey's extra flags and kubelet
// configuration to the variables the roles merge in both modes
// (docs/playbooks.md, extension points), as the cluster's group vars:
// apiserverArgs [--audit-log-maxage=30] is kube_apiserver_extra_config
// {audit-log-maxage: "30"}; a flag without a value is "true".
func kubekeyComponentArgs(spec *ytree.Node, kc *kubekeyConversion, ps *Problems) {
	k := mapAt(spec, "kubernetes")
	if k == nil {
		return
	}
	setAll := func(at Pos, variable string, v *ytree.Node) {
		g := ensureMap(ensureMap(spec, "roleGroupVars", at), "all", at)
		removeKey(g, variable)
		g.Keys, g.Vals = append(g.Keys, strNode(variable, at)), append(g.Vals, v)
	}
	for _, m := range []struct{ field, variable string }{
		{"apiserverArgs", "kube_apiserver_extra_config"},
		{"controllerManagerArgs", "kube_controller_manager_extra_config"},
		{"schedulerArgs", "kube_scheduler_extra_config"},
	} {
		fk, fv := removeKey(k, m.field)
		if fk == nil || fv.IsNull() || fv.Kind == ytree.List && len(fv.List) == 0 {
			continue
		}
		path := "spec.kubernetes." + m.field
		if fv.Kind != ytree.List {
			ps.List = append(ps.List, Problem{Pos: fv.TokPos, Path: path, Message: "expected a list of --flag=value, got " + fv.KindName()})
			continue
		}
		flags := &ytree.Node{Kind: ytree.Map, Pos: fv.Pos, TokPos: fv.TokPos}
		for i, a := range fv.List {
			s, ok := a.Str()
			name, val, hasVal := strings.Cut(strings.TrimPrefix(s, "--"), "=")
			if !ok || !strings.HasPrefix(s, "--") || name == "" {
				ps.List = append(ps.List, Problem{Pos: a.Pos, Path: fieldpath.Index(path, i), Message: fmt.Sprintf("%q is not a --flag or --flag=value", a.Text)})
				continue
			}
			if !hasVal {
				val = "true"
			}
			removeKey(flags, name) // the last of a flag given twice wins, as on a command line
			flags.Keys, flags.Vals = append(flags.Keys, strNode(name, a.Pos)), append(flags.Vals, strNode(val, a.Pos))
		}
		setAll(fk.Pos, m.variable, flags)
		kc.rename(path, "spec.roleGroupVars.all."+m.variable)
	}
	if fk, fv := removeKey(k, "kubeletConfiguration"); fk != nil && !fv.IsNull() {
		setAll(fk.Pos, "kubelet_extra_config", fv)
		kc.rename("spec.kubernetes.kubeletConfiguration", "spec.roleGroupVars.all.kubelet_extra_config")
	}
}
