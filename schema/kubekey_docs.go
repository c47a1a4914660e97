package schema

import (
	"fmt"
	"strings"

	"github.com/mensylisir/kubexm/internal/ytree"
)

// KubeKey's other formats, recognised to name them instead of failing on
// their first unknown field.
const (
	kubekeyV4APIVersion = "kubekey.kubesphere.io/v1"       // KubeKey v4: Inventory, Config, Pipeline
	kubekeyV1APIVersion = "kubekey.kubesphere.io/v1alpha1" // KubeKey v1
	kubesphereInstaller = "installer.kubesphere.io/v1alpha1"
)

// scalarAt returns the text of the scalar n[k], or "".
func scalarAt(n *ytree.Node, k string) string {
	if v := n.Get(k); isScalar(v) {
		return v.Text
	}
	return ""
}

// docPos is where a document starts: its apiVersion key, else its first node.
func docPos(d *ytree.Node) Pos {
	if i := d.Index("apiVersion"); i >= 0 {
		return d.Keys[i].Pos
	}
	return d.TokPos
}

// pickDocument chooses the cluster among the documents of a file. One
// document is the cluster; of several, the single KubeKey v3 Cluster is
// converted and every other document named in a warning (what
// `kk create config --with-kubesphere` writes: the Cluster, then
// KubeSphere's ClusterConfiguration).
func pickDocument(file string, docs []*ytree.Node) (*ytree.Node, []Warning, error) {
	if len(docs) == 1 {
		return docs[0], nil, nil
	}
	cluster := -1
	for i, d := range docs {
		if scalarAt(d, "apiVersion") == KubeKeyAPIVersion && scalarAt(d, "kind") == "Cluster" {
			if cluster >= 0 {
				return nil, nil, &Error{Problems: []Problem{{Pos: docPos(d), Message: "a second KubeKey Cluster document; a cluster file describes one cluster", Hint: "split the file, one cluster each"}}}
			}
			cluster = i
		}
	}
	if cluster < 0 {
		return nil, nil, &Error{Problems: []Problem{{Pos: Pos{File: file}, Message: fmt.Sprintf("%d YAML documents; a cluster file holds exactly one", len(docs))}}}
	}
	var warnings []Warning
	for i, d := range docs {
		if i == cluster {
			continue
		}
		av, kind := scalarAt(d, "apiVersion"), scalarAt(d, "kind")
		msg := fmt.Sprintf("document %d (apiVersion %q, kind %q) is not converted: kubexm reads only the KubeKey Cluster of this file", i+1, av, kind)
		if av == kubesphereInstaller && kind == "ClusterConfiguration" {
			msg = fmt.Sprintf("document %d, KubeSphere's ClusterConfiguration (what kk create config --with-kubesphere adds), is not converted: kubexm does not install KubeSphere; install it on the finished cluster with ks-installer or its Helm chart", i+1)
		}
		warnings = append(warnings, Warning{Pos: docPos(d), Message: msg})
	}
	return docs[cluster], warnings, nil
}

// otherKubeKeyFormat names KubeKey formats kubexm does not read, or "".
func otherKubeKeyFormat(root *ytree.Node) string {
	av, kind := scalarAt(root, "apiVersion"), scalarAt(root, "kind")
	switch av {
	case kubekeyV4APIVersion:
		if kind == "" {
			kind = "document"
		}
		return fmt.Sprintf("a KubeKey v4 %s (%s): KubeKey v4 describes hosts in an Inventory and settings in a Config for its playbooks, which kubexm does not convert; "+
			"write a kubexm cluster file (kubexm create config) with these hosts, or convert a KubeKey v3 file (%s)", kind, av, KubeKeyAPIVersion)
	case kubekeyV1APIVersion:
		return fmt.Sprintf("a KubeKey v1 cluster file (%s): kubexm converts KubeKey v3 files (%s); let KubeKey v3 upgrade it first, or write a kubexm cluster file (kubexm create config)", av, KubeKeyAPIVersion)
	}
	return ""
}

// warnKubeKeyDefaults names, before converting, each KubeKey v3 default
// that kubexm does not share and the file leaves to the default, so that
// nothing switches silently. spec is the KubeKey spec (nil when absent).
func warnKubeKeyDefaults(root, spec *ytree.Node, ps *Problems) {
	var ours Cluster
	SetDefaults(&ours)
	// where is the place a missing field would be written: its parent
	// block, else spec, else the top of the file.
	where := func(block string) Pos {
		if i := spec.Index(block); i >= 0 {
			return spec.Keys[i].Pos
		}
		if i := root.Index("spec"); i >= 0 {
			return root.Keys[i].Pos
		}
		return root.TokPos
	}
	k := mapAt(spec, "kubernetes")
	warn := func(block, path, format string, args ...any) {
		ps.Warnings = append(ps.Warnings, Warning{Pos: where(block), Path: path, Message: "KubeKey default differs: " + fmt.Sprintf(format, args...)})
	}
	runtime := scalarAt(k, "containerManager")
	if runtime == "" {
		warn("kubernetes", "spec.kubernetes.containerManager",
			"not set, so KubeKey would install docker; kubexm installs %s (containerRuntime.type), the only runtime it supports", ours.Spec.Kubernetes.ContainerRuntime.Type)
		runtime = ours.Spec.Kubernetes.ContainerRuntime.Type
	}
	if runtime == "containerd" {
		warn("kubernetes", "spec.kubernetes.containerRuntime.version",
			"KubeKey v3 installs containerd 1.7; kubexm installs containerd %s (its config format v3)", ours.Spec.Kubernetes.ContainerRuntime.Version)
	}
	if scalarAt(k, "version") == "" {
		warn("kubernetes", "spec.kubernetes.version", "not set, so KubeKey would install Kubernetes v1.23; kubexm installs %s", ours.Spec.Kubernetes.Version)
	}
	if scalarAt(k, "nodelocaldns") == "" && mapAt(mapAt(spec, "dns"), "nodelocaldns") == nil {
		warn("kubernetes", "spec.kubernetes.nodelocaldns",
			"not set, so KubeKey would install NodeLocal DNSCache; kubexm installs it only with spec.dns.nodelocaldns (set kubernetes.nodelocaldns: true to keep it)")
	}
	if scalarAt(mapAt(spec, "network"), "plugin") == "" {
		warn("network", "spec.network.plugin", "not set, so KubeKey would install calico; kubexm installs %s", ours.Spec.Network.Plugin)
	}
	// ours holds kubexm's defaults only; the file's plugin decides.
	if net := mapAt(spec, "network"); scalarAt(net, "plugin") == "calico" &&
		scalarAt(mapAt(net, "calico"), "ipipMode") == "" && scalarAt(mapAt(net, "calico"), "vxlanMode") == "" {
		warn("network", "spec.network.calico.ipipMode",
			"not set, so KubeKey would encapsulate with IP-in-IP (ipipMode Always); kubexm uses vxlan (vxlanMode Always), which needs no ipip kernel module")
	}
	if scalarAt(mapAt(spec, "controlPlaneEndpoint"), "domain") == "" {
		warn("controlPlaneEndpoint", "spec.controlPlaneEndpoint.domain", "not set, so KubeKey would use lb.kubesphere.local; kubexm uses %s", ours.Spec.ControlPlaneEndpoint.Domain)
	}
	if e := mapAt(spec, "etcd"); scalarAt(e, "type") != "external" && scalarAt(e, "version") == "" {
		warn("etcd", "spec.etcd.version", "KubeKey v3 installs etcd v3.5; kubexm installs etcd %s", ours.Spec.Etcd.Version)
	}
}

// kubekeyStorage drops storage.openebs: `kk create config` writes it into
// every file as a setting, and KubeKey installs OpenEBS only when asked
// (kk create cluster --with-local-storage), while in kubexm the block asks
// for the installation.
func kubekeyStorage(spec *ytree.Node, kc *kubekeyConversion) {
	if k, _ := removeKey(mapAt(spec, "storage"), "openebs"); k != nil {
		kc.drop("spec.storage.openebs", "KubeKey installs OpenEBS only with --with-local-storage; kubexm does not install it yet")
	}
}

// kubekeyKubernetesType keeps a KubeKey cluster what it is: KubeKey's
// kubernetes.type is the distribution (kubernetes, k3s), and KubeKey
// installs kubernetes with kubeadm, so the cluster becomes kubernetes.type
// kubeadm (etcd.type kubekey stays etcd outside kubeadm: kubexm, kubeadm's
// external etcd). k3s stays, for validation to refuse by name.
func kubekeyKubernetesType(spec *ytree.Node, kc *kubekeyConversion) {
	at := spec.TokPos
	if i := spec.Index("kubernetes"); i >= 0 {
		at = spec.Keys[i].Pos
	}
	k := ensureMap(spec, "kubernetes", at)
	i := k.Index("type")
	switch {
	case i < 0:
		k.Keys, k.Vals = append(k.Keys, strNode("type", at)), append(k.Vals, strNode("kubeadm", at))
		kc.rename("spec.kubernetes.type (KubeKey's default: kubernetes, installed with kubeadm)", "kubeadm")
	case isScalar(k.Vals[i]) && strings.EqualFold(k.Vals[i].Text, "kubernetes"):
		k.Vals[i] = strNode("kubeadm", k.Vals[i].TokPos)
		kc.rename("spec.kubernetes.type kubernetes (installed with kubeadm)", "kubeadm")
	}
}
