package schema

import (
	"errors"
	"strings"
	"testing"
)

func kkEnv(k string) (string, bool) {
	if k == "KK_PW" {
		return "pw", true
	}
	return "", false
}

func warningText(ws []Warning) string {
	var all []string
	for _, w := range ws {
		all = append(all, w.String())
	}
	return strings.Join(all, "\n")
}

// TestKubeKeyConfigExample: a KubeKey v3 file using most of its fields is
// converted, every dropped field named; the choices kubexm does not install
// are kept as written, so that validation names each of them.
func TestKubeKeyConfigExample(t *testing.T) {
	const file = "testdata/kubekey-v3-config-example.yaml"
	fakeHome(t)
	c, warnings, err := Decode(file, mustRead(t, file))
	if err != nil {
		t.Fatal(err)
	}
	w := warningText(warnings)
	for _, want := range []string{
		"converted from KubeKey v3",
		"dropped: spec.controlPlaneEndpoint.kubevip",
		"dropped: spec.kubernetes.kata",
		"dropped: spec.kubernetes.imageRepo",
		"dropped: spec.network.multusCNI",
		"dropped: spec.storage.openebs (KubeKey installs OpenEBS only with --with-local-storage; kubexm does not install it yet)",
		"dropped: spec.hosts[3].timeout",
		"spec.kubernetes.type: KubeKey default differs: KubeKey installs Kubernetes with kubeadm",
		"spec.etcd.version: KubeKey default differs: KubeKey v3 installs etcd v3.5; kubexm installs etcd " + DefaultEtcdVersion,
	} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
	// The runtime was chosen: no default warning about it.
	if strings.Contains(w, "would install docker") {
		t.Errorf("warned about a default the file sets:\n%s", w)
	}
	if c.Spec.Kubernetes.ContainerRuntime.Type != "docker" || c.Spec.Network.Plugin != "calico" || c.Spec.Registry.Type != "harbor" {
		t.Errorf("the user's choices were switched: %+v", c.Spec)
	}

	_, _, err = parseWith(file, mustRead(t, file), kkEnv, nil)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want validation problems, got %v", err)
	}
	msg := err.Error()
	for _, want := range []string{
		file + ":22:5: spec.roleGroups.registry: setting registry is not supported yet",
		file + ":35:14: spec.kubernetes.version: Kubernetes v1.23.15 is not supported by this kubexm (hint: supported: v1.35 to v1.37",
		file + ":37:23: spec.kubernetes.containerRuntime.type: docker is not supported yet",
		"spec.network.plugin: calico is not supported yet",
		"spec.registry.type: harbor is not supported yet",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("validation lacks %q:\n%s", want, msg)
		}
	}
}

// TestKubeKeyWithKubeSphere: the two-document file of
// `kk create config --with-kubesphere` converts its Cluster, names the
// ClusterConfiguration it does not convert, and names each KubeKey default
// kubexm replaces; with those defaults the cluster is one kubexm installs.
func TestKubeKeyWithKubeSphere(t *testing.T) {
	const file = "testdata/kubekey-v3-with-kubesphere.yaml"
	c, warnings, err := parseWith(file, mustRead(t, file), kkEnv, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := warningText(warnings)
	for _, want := range []string{
		file + ":39:1: document 2, KubeSphere's ClusterConfiguration (what kk create config --with-kubesphere adds), is not converted: kubexm does not install KubeSphere",
		file + ":24:3: spec.kubernetes.containerManager: KubeKey default differs: not set, so KubeKey would install docker; kubexm installs containerd",
		"spec.kubernetes.version: KubeKey default differs: not set, so KubeKey would install Kubernetes v1.23; kubexm installs " + DefaultKubernetesVersion,
		"spec.network.plugin: KubeKey default differs: not set, so KubeKey would install calico; kubexm installs flannel",
		"spec.controlPlaneEndpoint.domain: KubeKey default differs: not set, so KubeKey would use lb.kubesphere.local; kubexm uses lb.kubexm.local",
		"spec.kubernetes.containerRuntime.version: KubeKey default differs: KubeKey v3 installs containerd 1.7",
	} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
	if c.Spec.Kubernetes.ContainerRuntime.Type != "containerd" || c.Spec.Network.Plugin != "flannel" || c.Metadata.Name != "sample" {
		t.Errorf("converted: %+v", c.Spec)
	}
}

func TestKubeKeyOtherFormatsNamed(t *testing.T) {
	const file = "testdata/kubekey-v4-inventory.yaml"
	_, _, err := Decode(file, mustRead(t, file))
	if err == nil || !strings.Contains(err.Error(), file+":3:13: apiVersion: this is a KubeKey v4 Inventory (kubekey.kubesphere.io/v1)") {
		t.Errorf("v4 inventory: %v", err)
	}
	v1 := "apiVersion: kubekey.kubesphere.io/v1alpha1\nkind: Cluster\nmetadata: {name: x}\nspec: {}\n"
	if _, _, err := Decode("v1.yaml", []byte(v1)); err == nil || !strings.Contains(err.Error(), "a KubeKey v1 cluster file") {
		t.Errorf("v1alpha1: %v", err)
	}
	two := "apiVersion: " + APIVersion + "\nkind: Cluster\n---\napiVersion: " + APIVersion + "\nkind: Cluster\n"
	if _, _, err := Decode("two.yaml", []byte(two)); err == nil || !strings.Contains(err.Error(), "2 YAML documents; a cluster file holds exactly one") {
		t.Errorf("two kubexm documents: %v", err)
	}
	kk := "apiVersion: " + KubeKeyAPIVersion + "\nkind: Cluster\nspec: {}\n"
	if _, _, err := Decode("kk2.yaml", []byte(kk+"---\n"+kk)); err == nil || !strings.Contains(err.Error(), "kk2.yaml:5:1: a second KubeKey Cluster document") {
		t.Errorf("two KubeKey clusters: %v", err)
	}
}

// calico without an encapsulation: KubeKey's is ipip, kubexm's vxlan, and
// the conversion says so; a file that chose keeps its choice, unwarned.
func TestKubeKeyCalicoEncapsulation(t *testing.T) {
	const kk = "apiVersion: kubekey.kubesphere.io/v1alpha2\nkind: Cluster\nmetadata: {name: x}\n" +
		"spec:\n  hosts:\n  - {name: n1, address: 10.0.0.1, password: x}\n  roleGroups: {etcd: [n1], control-plane: [n1], worker: [n1]}\n" +
		"  network:\n    plugin: calico\n"
	const want = "spec.network.calico.ipipMode: KubeKey default differs: not set, so KubeKey would encapsulate with IP-in-IP (ipipMode Always); kubexm uses vxlan"
	c, warnings, err := Decode("kk.yaml", []byte(kk))
	if err != nil {
		t.Fatal(err)
	}
	if w := warningText(warnings); !strings.Contains(w, want) {
		t.Errorf("warnings lack %q:\n%s", want, w)
	}
	SetDefaults(c)
	if n := c.Spec.Network.Calico; n == nil || n.VXLANMode != "Always" || n.IPIPMode != "Never" {
		t.Errorf("calico %+v, want vxlan", n)
	}
	c, warnings, err = Decode("kk.yaml", []byte(kk+"    calico: {ipipMode: Always}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w := warningText(warnings); strings.Contains(w, "ipipMode") {
		t.Errorf("warned about a mode the file sets:\n%s", w)
	}
	SetDefaults(c)
	if n := c.Spec.Network.Calico; n.IPIPMode != "Always" || n.VXLANMode != "Never" {
		t.Errorf("calico %+v, want ipip kept", n)
	}
}
