package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"maps"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/schema/validate"

	"github.com/mensylisir/kubexm/engine/model"

	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/schema"
)

// identityHarness runs roles/identity (the adoption, then the record) on
// one local host standing for a master and etcd member, with the host's
// paths under a temporary directory.
type identityHarness struct {
	t                          *testing.T
	host, work                 string
	pb                         *engine.Playbook
	record, store, kcert, essl string
}

func newIdentityHarness(t *testing.T) *identityHarness {
	t.Helper()
	return newIdentityHarnessWith(t, "")
}

// newIdentityHarnessWith runs plays (YAML list items) after the identity
// play, before the record.
func newIdentityHarnessWith(t *testing.T, plays string) *identityHarness {
	t.Helper()
	root := moduleRoot(t)
	dir := t.TempDir()
	pbDir := filepath.Join(dir, "playbooks", "identity")
	if err := os.MkdirAll(pbDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pbDir, "playbook.yaml"), []byte(`name: identity-test
inventory: cluster
defaults_files:
  - ../../roles/artifacts/defaults/main.yaml
  - ../../roles/etcd/defaults/main.yaml
  - ../../roles/kubernetes/pki/defaults/main.yaml
plays:
  - name: Cluster identity
    hosts: etcd,k8s_cluster
    any_errors_fatal: true
    roles: [identity]
`+plays+`  - name: Cluster record
    hosts: etcd,k8s_cluster
    roles:
      - {role: identity, tasks_from: record}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := loadOptions()
	opts.RolesPath = []string{filepath.Join(root, "roles")}
	pb, err := engine.Load(context.Background(), pbDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	h := &identityHarness{t: t, host: filepath.Join(dir, "host"), work: filepath.Join(dir, "work"), pb: pb}
	h.record, h.store = filepath.Join(h.host, "cluster.json"), filepath.Join(h.host, "pki")
	h.kcert, h.essl = filepath.Join(h.host, "kubernetes-pki"), filepath.Join(h.host, "etcd-ssl")
	return h
}

// run runs the playbook with cluster.yaml's pod range pods; the error is the
// run's, the text what failed.
func (h *identityHarness) run(pods string, extra ...map[string]any) (string, error) {
	h.t.Helper()
	file := filepath.Join(h.work, "..", "cluster.yaml")
	yaml := `apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata: {name: c1}
spec:
  hosts:
  - {name: n1, address: 192.0.2.1, internalAddress: 192.0.2.1, user: root, password: not-used}
  roleGroups: {etcd: [n1], master: [n1], worker: [n1]}
  kubernetes: {type: kubexm, proxyMode: iptables}
  etcd: {type: kubexm}
  network: {plugin: flannel, kubePodsCIDR: ` + pods + `}
`
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		h.t.Fatal(err)
	}
	c, _, err := validate.Parse(file, []byte(yaml))
	if err != nil {
		h.t.Fatal(err)
	}
	inv, err := schema.Inventory(c, file)
	if err != nil {
		h.t.Fatal(err)
	}
	// The one host is this machine, reached without SSH.
	for i := range inv.Hosts {
		inv.Hosts[i].Local = true
	}
	vars := map[string]any{"identity_record_file": h.record, "identity_pki_store": h.store, "kube_cert_dir": h.kcert, "etcd_cert_dir": h.essl}
	for _, e := range extra {
		maps.Copy(vars, e)
	}
	var failed []string
	_, err = engine.Run(context.Background(), h.pb, inv, engine.RunOptions{WorkDir: h.work, NoJournal: true,
		Output: model.SinkFunc(func(e model.Event) {
			if e.Kind == model.EventHostResult && e.Status == model.StatusFailed {
				failed = append(failed, e.Message)
			}
		}),
		ExtraVars: vars})
	return strings.Join(failed, "\n"), err
}

// The identity role on a host: a new cluster passes and gets its record;
// a work directory holding another CA than the host runs with is refused
// naming both fingerprints; an empty work directory takes the masters'
// copy; a changed pod range is refused against the record.
func TestIdentityRole(t *testing.T) {
	h := newIdentityHarness(t)
	ca := writeTestCA(t, filepath.Join(h.work, "certs", "etcd"), "etcd-ca")
	if msg, err := h.run("10.233.64.0/18"); err != nil {
		t.Fatalf("a new cluster: %v: %s", err, msg)
	}
	var rec struct {
		Cluster     string            `json:"cluster"`
		Authorities map[string]string `json:"authorities"`
		Settings    map[string]string `json:"settings"`
	}
	data, err := os.ReadFile(h.record)
	if err != nil || json.Unmarshal(data, &rec) != nil {
		t.Fatalf("the record: %v: %s", err, data)
	}
	if rec.Cluster != "c1" || rec.Authorities["etcd CA"] != ca || rec.Settings["network.kubePodsCIDR"] != "10.233.64.0/18" {
		t.Errorf("the record: %+v, want the etcd CA %s", rec, ca)
	}

	// The host runs with this CA, the masters keep a copy.
	copyFile(t, filepath.Join(h.work, "certs", "etcd", "ca.crt"), filepath.Join(h.essl, "ca.pem"))
	copyFile(t, filepath.Join(h.work, "certs", "etcd", "ca.crt"), filepath.Join(h.store, "etcd", "ca.crt"))
	copyFile(t, filepath.Join(h.work, "certs", "etcd", "ca.key"), filepath.Join(h.store, "etcd", "ca.key"))

	// Another CA in the work directory: refused, both fingerprints named.
	if err := os.RemoveAll(filepath.Join(h.work, "certs")); err != nil {
		t.Fatal(err)
	}
	other := writeTestCA(t, filepath.Join(h.work, "certs", "etcd"), "etcd-ca")
	msg, err := h.run("10.233.64.0/18")
	if !errors.Is(err, engine.ErrFailed) || !strings.Contains(msg, ca) || !strings.Contains(msg, other) || !strings.Contains(msg, "Nothing was changed") {
		t.Errorf("another CA: %v: %s", err, msg)
	}

	// An empty work directory takes the masters' copy and passes.
	if err := os.RemoveAll(filepath.Join(h.work, "certs")); err != nil {
		t.Fatal(err)
	}
	if msg, err := h.run("10.233.64.0/18"); err != nil {
		t.Fatalf("an empty work directory: %v: %s", err, msg)
	}
	if got, err := os.ReadFile(filepath.Join(h.work, "certs", "etcd", "ca.key")); err != nil || len(got) == 0 {
		t.Errorf("the CA key was not taken from the masters' copy: %v", err)
	}

	// A pod range the running cluster cannot take.
	msg, err = h.run("10.1.0.0/16")
	if !errors.Is(err, engine.ErrFailed) || !strings.Contains(msg, "spec.network.kubePodsCIDR is 10.233.64.0/18 in the running cluster") || !strings.Contains(msg, "10.1.0.0/16 in this cluster.yaml") {
		t.Errorf("a changed pod range: %v: %s", err, msg)
	}
}

// writeTestCA writes ca.crt and ca.key of a new CA into dir and returns the
// certificate's fingerprint.
func writeTestCA(t *testing.T, dir, cn string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A CA rotation's stages, each followed by the masters' copy of the PKI
// (tasks/store.yaml): the copy follows the work directory, so the promoted
// ca-next and the retired ca-old leave it, and a later run, which takes the
// copy first, finds a finished rotation rather than one stopped halfway.
func TestIdentityStoreFollowsARotation(t *testing.T) {
	h := newIdentityHarnessWith(t, `  - name: a stage of the etcd CA's rotation, then the masters' copy
    hosts: etcd
    tasks:
      - ca_trust: {path: certs/etcd, name: ca, stage: "{{ .rotation_stage }}"}
        run_once: true
      - include_role: {name: identity, tasks_from: store}
`)
	writeTestCA(t, filepath.Join(h.work, "certs", "etcd"), "etcd-ca")
	stored := func() string {
		t.Helper()
		entries, err := os.ReadDir(filepath.Join(h.store, "etcd"))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".bak") {
				names = append(names, e.Name())
			}
		}
		return strings.Join(names, " ")
	}
	for _, c := range []struct{ stage, want string }{
		{"bundle", "ca-bundle.crt ca.crt ca.key"},
		{"add", "ca-bundle.crt ca-next.crt ca-next.key ca.crt ca.key"},
		{"promote", "ca-bundle.crt ca-old.crt ca-old.key ca.crt ca.key"},
		{"retire", "ca-bundle.crt ca.crt ca.key"},
		{"bundle", "ca-bundle.crt ca.crt ca.key"},
	} {
		if msg, err := h.run("10.233.64.0/18", map[string]any{"rotation_stage": c.stage}); err != nil {
			t.Fatalf("stage %s: %v: %s", c.stage, err, msg)
		}
		if got := stored(); got != c.want {
			t.Errorf("after stage %s the masters keep %q, want %q", c.stage, got, c.want)
		}
	}
}
