package schema

import (
	"reflect"
	"strings"

	"github.com/mensylisir/kubexm/internal/ytree"
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
func convertKubeKey(root *ytree.Node, ps *problems) {
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
	}
	pruneUnknown(root, reflect.TypeFor[Cluster](), "", kc)

	var b strings.Builder
	b.WriteString("converted from KubeKey v3 (" + KubeKeyAPIVersion + "); run `kubexm config convert` to save the kubexm form")
	if len(kc.renamed) > 0 {
		b.WriteString("\n  renamed: " + strings.Join(kc.renamed, "\n  renamed: "))
	}
	if len(kc.dropped) > 0 {
		b.WriteString("\n  dropped: " + strings.Join(kc.dropped, "\n  dropped: "))
	}
	ps.warnings = append(ps.warnings, Warning{Pos: avPos, Path: "apiVersion", Message: b.String()})
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

// pruneUnknown drops keys the kubexm types do not have. For a KubeKey file
// these are features kubexm does not carry over; they are listed in the
// conversion warning rather than failing the load.
func pruneUnknown(n *ytree.Node, t reflect.Type, path string, kc *kubekeyConversion) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != ytree.Map {
			return
		}
		fields := yamlFields(t)
		var keys, vals []*ytree.Node
		for i, k := range n.Keys {
			idx, ok := fields[k.Text]
			if !ok {
				kc.drop(child(path, k.Text), "")
				continue
			}
			pruneUnknown(n.Vals[i], t.Field(idx).Type, child(path, k.Text), kc)
			keys, vals = append(keys, k), append(vals, n.Vals[i])
		}
		n.Keys, n.Vals = keys, vals
	case reflect.Slice:
		if n.Kind == ytree.List {
			for i, it := range n.List {
				pruneUnknown(it, t.Elem(), index(path, i), kc)
			}
		}
	case reflect.Map:
		if n.Kind == ytree.Map {
			for i, k := range n.Keys {
				pruneUnknown(n.Vals[i], t.Elem(), key(path, k.Text), kc)
			}
		}
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
