package validate

import (
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/schema"
)

// A valid file's verdict for people says what it describes.
func TestValidationWrite(t *testing.T) {
	c := &schema.Cluster{}
	c.Metadata.Name = "demo"
	c.Spec.Hosts = make([]schema.Host, 3)
	c.Spec.Kubernetes.Version, c.Spec.Kubernetes.Type = "v1.37.2", "kubeadm"
	c.Spec.Etcd.Type, c.Spec.Network.Plugin = "kubexm", "calico"
	v, err := NewValidation("cluster.yaml", c, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := v.Write(&b); err != nil || b.String() != "cluster.yaml: valid: cluster demo, 3 hosts, Kubernetes v1.37.2 (kubeadm), etcd kubexm, calico\n" {
		t.Errorf("Write = %q, %v", b.String(), err)
	}
}
