//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	"github.com/mensylisir/kubexm/builtins/pki"
	"github.com/mensylisir/kubexm/test/testhosts"
)

// kubeadmRegistry is the kubeadm suite's registry mode
// (KUBEXM_E2E_KUBEADM_REGISTRY=1, make e2e-kubeadm-registry): the registry
// kubexm deployed on n2 served every image each node runs, kubeadm's
// control plane, kube-proxy, etcd, CoreDNS and pause included
// (checkPulledFromRegistry: none side-loaded, the push then sends nothing),
// and the cluster has one CA: the one kubeadm runs with on n1 is the work
// directory's (certs/kubeadm, which kubexm made before kubeadm init took
// it), the registry's certificate chains to it and every node trusts it
// alone for the registry.
func kubeadmRegistry(ctx context.Context, t *testing.T, set *testhosts.Set, v kubeadmVariant) {
	t.Helper()
	reg := *v.registry
	checkPulledFromRegistry(ctx, t, set, v.kx, reg, v.bundle)

	master := set.Hosts[0].Name
	out, err := set.SSH(ctx, master, "cat /etc/kubernetes/pki/ca.crt")
	if err != nil {
		t.Fatalf("%s: kubeadm's CA: %v", master, err)
	}
	kubeadmCA, err := pki.ParseCert([]byte(out))
	if err != nil {
		t.Fatalf("%s /etc/kubernetes/pki/ca.crt: %v", master, err)
	}
	name := filepath.Base(filepath.Dir(v.k.kubeconfig))
	work, err := os.ReadFile(filepath.Join(v.dir, ".kubexm", name, "certs", "kubeadm", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if c, err := pki.ParseCert(work); err != nil || !c.Equal(kubeadmCA) {
		t.Errorf("the work directory's certs/kubeadm/ca.crt is not the CA kubeadm runs with on %s (%v)", master, err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(kubeadmCA)
	if c := servedCert(t, reg.name); c == nil {
		t.Errorf("%s serves no certificate", reg.name)
	} else if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("%s serves a certificate (%s) that does not chain to kubeadm's CA: %v", reg.name, c.Subject.CommonName, err)
	}
	for _, h := range set.Hosts {
		path := "/etc/containerd/certs.d/" + reg.name + "/ca.crt"
		out, err := set.SSH(ctx, h.Name, "cat "+shellQuote(path))
		if err != nil {
			t.Fatalf("read %s on %s: %v", path, h.Name, err)
		}
		certs, err := pki.ParseCerts([]byte(out))
		if err != nil || len(certs) != 1 || !certs[0].Equal(kubeadmCA) {
			t.Errorf("%s %s: want kubeadm's CA alone, have %d certificates (%v)", h.Name, path, len(certs), err)
		}
	}
	t.Logf("one CA: kubeadm's on %s is the work directory's, signs %s's certificate, and every node trusts it alone for the registry", master, reg.name)
}
