package schema

import (
	"reflect"
	"strings"
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
func convertKubeKey(root *ynode, ps *problems) {
	kc := &kubekeyConversion{}
	av, _ := root.get("apiVersion")
	av.val = &ynode{kind: kindScalar, pos: av.val.pos, tag: "str", text: APIVersion}
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
	ps.warnings = append(ps.warnings, Warning{Pos: av.keyPos, Path: "apiVersion", Message: b.String()})
}

func convertKubeKeySpec(spec *ynode, kc *kubekeyConversion) {
	if rg := mapAt(spec, "roleGroups"); rg != nil {
		moveKey(rg, "control-plane", rg, "master", "spec.roleGroups.control-plane", "spec.roleGroups.master", kc)
	}
	if cpe := mapAt(spec, "controlPlaneEndpoint"); cpe != nil {
		moveKey(cpe, "address", cpe, "lb_address", "spec.controlPlaneEndpoint.address", "spec.controlPlaneEndpoint.lb_address", kc)
	}
	runtime := "containerd"
	if k := mapAt(spec, "kubernetes"); k != nil {
		if e, _ := k.get("containerManager"); e != nil && e.val.kind == kindScalar {
			runtime = e.val.text
			if runtime == "crio" {
				runtime = "cri-o"
				e.val = &ynode{kind: kindScalar, pos: e.val.pos, tag: "str", text: runtime}
			}
			cr := ensureMap(k, "containerRuntime", e.keyPos)
			moveKey(k, "containerManager", cr, "type", "spec.kubernetes.containerManager", "spec.kubernetes.containerRuntime.type", kc)
		}
	}
	if e := mapAt(spec, "etcd"); e != nil {
		if t, _ := e.get("type"); t != nil && t.val.kind == kindScalar && t.val.text == "kubekey" {
			t.val = &ynode{kind: kindScalar, pos: t.val.pos, tag: "str", text: "kubexm"}
			kc.rename("spec.etcd.type kubekey", "kubexm")
		}
	}
	if r := mapAt(spec, "registry"); r != nil {
		blockKey := strings.ReplaceAll(runtime, "cri-o", "crio")
		for _, f := range []string{"registryMirrors", "insecureRegistries"} {
			e, _ := r.get(f)
			if e == nil {
				continue
			}
			k := ensureMap(spec, "kubernetes", e.keyPos)
			cr := ensureMap(k, "containerRuntime", e.keyPos)
			block := ensureMap(cr, blockKey, e.keyPos)
			moveKey(r, f, block, f, "spec.registry."+f, "spec.kubernetes.containerRuntime."+blockKey+"."+f, kc)
		}
		if t, _ := r.get("type"); t != nil && t.val.kind == kindScalar && t.val.text == "" {
			removeKey(r, "type")
		}
	}
	if e, _ := spec.get("addons"); e != nil && e.val.kind == kindSeq {
		items := make([]*ynode, 0, len(e.val.items))
		detailed := false
		for _, it := range e.val.items {
			if it.kind == kindMap {
				name, _ := it.get("name")
				if name == nil || name.val.kind != kindScalar {
					kc.drop("spec.addons entry without a name", "")
					continue
				}
				detailed = detailed || len(it.keys) > 1
				items = append(items, name.val)
				continue
			}
			items = append(items, it)
		}
		if detailed {
			kc.drop("spec.addons[*].namespace/sources", "kubexm add-ons are named; install charts with a role")
		}
		e.val = &ynode{kind: kindSeq, pos: e.val.pos, items: items}
	}
}

// pruneUnknown drops keys the kubexm types do not have. For a KubeKey file
// these are features kubexm does not carry over; they are listed in the
// conversion warning rather than failing the load.
func pruneUnknown(n *ynode, t reflect.Type, path string, kc *kubekeyConversion) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.kind != kindMap {
			return
		}
		fields := yamlFields(t)
		kept := n.keys[:0:0]
		for _, e := range n.keys {
			idx, ok := fields[e.key]
			if !ok {
				kc.drop(child(path, e.key), "")
				continue
			}
			pruneUnknown(e.val, t.Field(idx).Type, child(path, e.key), kc)
			kept = append(kept, e)
		}
		n.keys = kept
	case reflect.Slice:
		if n.kind == kindSeq {
			for i, it := range n.items {
				pruneUnknown(it, t.Elem(), index(path, i), kc)
			}
		}
	case reflect.Map:
		if n.kind == kindMap {
			for _, e := range n.keys {
				pruneUnknown(e.val, t.Elem(), key(path, e.key), kc)
			}
		}
	}
}

func mapAt(n *ynode, k string) *ynode {
	if e, _ := n.get(k); e != nil && e.val.kind == kindMap {
		return e.val
	}
	return nil
}

// ensureMap returns the mapping under k, creating it (positioned at pos)
// when absent or null.
func ensureMap(n *ynode, k string, pos Pos) *ynode {
	if e, _ := n.get(k); e != nil {
		if e.val.kind != kindMap {
			e.val = &ynode{kind: kindMap, pos: pos}
		}
		return e.val
	}
	m := &ynode{kind: kindMap, pos: pos}
	n.keys = append(n.keys, yentry{key: k, keyPos: pos, val: m})
	return m
}

func removeKey(n *ynode, k string) *yentry {
	e, i := n.get(k)
	if e == nil {
		return nil
	}
	removed := *e
	n.keys = append(n.keys[:i], n.keys[i+1:]...)
	return &removed
}

// moveKey moves from[fk] to to[tk]. When both exist and are lists they are
// joined (KubeKey allowed master and control-plane side by side).
func moveKey(from *ynode, fk string, to *ynode, tk, fromPath, toPath string, kc *kubekeyConversion) {
	e := removeKey(from, fk)
	if e == nil {
		return
	}
	kc.rename(fromPath, toPath)
	if old, _ := to.get(tk); old != nil {
		if old.val.kind == kindSeq && e.val.kind == kindSeq {
			old.val = &ynode{kind: kindSeq, pos: old.val.pos, items: append(append([]*ynode{}, old.val.items...), e.val.items...)}
			return
		}
		kc.drop(fromPath, toPath+" is also set")
		return
	}
	to.keys = append(to.keys, yentry{key: tk, keyPos: e.keyPos, val: e.val})
}
