//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/builtins/pki"
	"github.com/mensylisir/kubexm/test/testhosts"
)

// kubeadmCARotation is issue 22's CA rotation in kubeadm mode, on the
// kubeadm suite's cluster (n1 master, the others
// workers): caRotation's checks (a token issued before never refused, every
// trust file, kubeconfig, leaf and served certificate of the new CAs only,
// the pods kept), then kubeadmAfterRotation's. One master: the API is away
// for one API server restart at a time, up to a minute on a loaded machine
// (kubeadm's certs-renew measures the same).
func kubeadmCARotation(ctx context.Context, t *testing.T, root string, set *testhosts.Set, v kubeadmVariant, name string) {
	t.Helper()
	masters, workers := set.Hosts[:1], set.Hosts[1:]
	// The stacked etcd's CA is kubeadm's, adopted with the others; roles/etcd keeps its own.
	etcdCA := "kubeadm/etcd/ca.crt"
	if v.etcdType == "kubexm" {
		etcdCA = "etcd/ca.crt"
	}
	caRotation(ctx, t, v.kx, v.k, set, masters, workers, root, v.dir, name, v.bundle, caLayout{
		desc:         "kubeadm, " + v.desc,
		workCAs:      []string{"kubeadm/ca.crt", "kubeadm/front-proxy-ca.crt", etcdCA},
		kubeadm:      true,
		oneAPIServer: true,
		maxGap:       90 * time.Second,
		// On the master: 7 certificates, 4 kubeconfigs and the kubelet's; one per worker.
		minLeaves: 12 + len(workers),
		registry:  v.registry,
	})
}

// kubeadmAfterRotation checks what only kubeadm mode has: the kubelets'
// kubeconfigs and client certificates, cluster-info (what kubeadm join
// trusts), kube-controller-manager back on kubeadm's own signing flag with
// no ca-signer.crt left, and the control machine's copy of the CAs.
func kubeadmAfterRotation(ctx context.Context, t *testing.T, k kubectlRunner, set *testhosts.Set, masters []testhosts.Host, newCAs []*x509.Certificate, workKey string,
	chainsToNew func(string, *x509.Certificate), onlyNew func(string, []byte, *x509.Certificate)) {
	t.Helper()
	kubeconfigCA := func(where string, data []byte) {
		kc, err := pki.ParseKubeConfig(data)
		if err != nil || len(kc.Clusters) != 1 {
			t.Fatalf("%s: %v (%d clusters)", where, err, len(kc.Clusters))
		}
		ca, err := base64.StdEncoding.DecodeString(kc.Clusters[0].Cluster.CertificateAuthorityData)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		onlyNew(where+" (its CA)", ca, newCAs[0])
	}
	for _, h := range set.Hosts {
		out, err := set.SSH(ctx, h.Name, "cat /etc/kubernetes/kubelet.conf")
		if err != nil {
			t.Fatalf("kubelet.conf on %s: %v", h.Name, err)
		}
		kubeconfigCA(h.Name+" kubelet.conf", []byte(out))
		out, err = set.SSH(ctx, h.Name, "cat /var/lib/kubelet/pki/kubelet-client-current.pem; ls /var/lib/kubelet/pki")
		if err != nil {
			t.Fatalf("the kubelet's client certificate on %s: %v", h.Name, err)
		}
		c, err := pki.ParseCert([]byte(out))
		if err != nil {
			t.Fatalf("the kubelet's client certificate on %s: %v", h.Name, err)
		}
		chainsToNew(h.Name+" kubelet-client-current.pem", c)
		if strings.Contains(out, "kubexm-client.") {
			t.Errorf("%s: the rotation left its copies of the kubelet's key in /var/lib/kubelet/pki:\n%s", h.Name, out)
		}
	}
	for _, m := range masters {
		out, err := set.SSH(ctx, m.Name, "grep -h -- --cluster-signing-cert-file= /etc/kubernetes/manifests/kube-controller-manager.yaml; ls /etc/kubernetes/pki")
		if err != nil {
			t.Fatalf("%s: %v\n%s", m.Name, err, out)
		}
		if !strings.Contains(out, "--cluster-signing-cert-file=/etc/kubernetes/pki/ca.crt\n") {
			t.Errorf("%s: kube-controller-manager does not sign with kubeadm's ca.crt again:\n%s", m.Name, out)
		}
		if strings.Contains(out, "ca-signer.crt") {
			t.Errorf("%s: ca-signer.crt is left after the rotation:\n%s", m.Name, out)
		}
	}
	info, err := k.run(ctx, "", "get", "configmap", "cluster-info", "-n", "kube-public", "-o", "jsonpath={.data.kubeconfig}")
	if err != nil {
		t.Fatalf("cluster-info: %v\n%s", err, info)
	}
	kubeconfigCA("kube-public/cluster-info", []byte(info))
	// The masters sign with the new CA's key, the one the work directory keeps.
	want, err := os.ReadFile(workKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range masters {
		if out, err := set.SSH(ctx, m.Name, "cat /etc/kubernetes/pki/ca.key"); err != nil || out != string(want) {
			t.Errorf("ca.key on %s is not the new CA's key (%s): %v", m.Name, workKey, err)
		}
	}
}
