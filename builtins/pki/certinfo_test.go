package pki

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport/local"
)

func TestCertInfoLocalAndOnHost(t *testing.T) {
	env := testEnv(t)
	dir := clusterPKI(t, env)
	run(t, genCert{}, env, step.Args{"path": "certs/kubernetes", "name": "node", "common_name": "system:node:n1",
		"organization": []any{"system:nodes"}, "usages": []any{"client", "server"}, "sans": []any{"n1", "10.0.0.1"}, "validity": "90d"})
	want := readCert(t, filepath.Join(dir, "node.crt"))

	check := func(t *testing.T, d map[string]any, path string) {
		t.Helper()
		if d["path"] != path || d["exists"] != true || d["common_name"] != "system:node:n1" ||
			d["subject"] != "CN=system:node:n1,O=system:nodes" || d["issuer"] != "CN=kubernetes" ||
			d["is_ca"] != false || d["expired"] != false || d["serial"] != serialHex(want) {
			t.Errorf("cert_info data: %v", d)
		}
		ca := readCert(t, filepath.Join(dir, "ca.crt"))
		if d["authority_key_id"] != hex.EncodeToString(ca.SubjectKeyId) || d["authority_key_id"] == "" ||
			d["subject_key_id"] != hex.EncodeToString(want.SubjectKeyId) {
			t.Errorf("key ids: authority %v, subject %v; want the CA's %x and %x", d["authority_key_id"], d["subject_key_id"], ca.SubjectKeyId, want.SubjectKeyId)
		}
		if days := d["days_left"].(int); days != 89 {
			t.Errorf("days_left %d, want 89 for a fresh 90-day certificate", days)
		}
		sans := d["sans"].(map[string]any)
		if !slices.Equal(sans["dns"].([]any), []any{"n1"}) || !slices.Equal(sans["ips"].([]any), []any{"10.0.0.1"}) {
			t.Errorf("sans %v", sans)
		}
		if !slices.Equal(d["organization"].([]any), []any{"system:nodes"}) {
			t.Errorf("organization %v", d["organization"])
		}
		na, err := time.Parse(time.RFC3339, d["not_after"].(string))
		if err != nil || !na.Equal(want.NotAfter) {
			t.Errorf("not_after %v (%v), want %v", d["not_after"], err, want.NotAfter)
		}
		if _, err := time.Parse(time.RFC3339, d["not_before"].(string)); err != nil {
			t.Errorf("not_before: %v", err)
		}
	}

	ci := certInfo{}
	res := run(t, ci, env, step.Args{"path": "certs/kubernetes/node.crt", "local": true})
	if res.Changed {
		t.Error("cert_info reported a change")
	}
	check(t, res.Data, filepath.Join(dir, "node.crt"))

	// The same file read through the host's transport.
	env.Target = local.New("localhost")
	res = run(t, ci, env, step.Args{"path": filepath.Join(dir, "node.crt")})
	check(t, res.Data, filepath.Join(dir, "node.crt"))

	// Several files, one missing, one the CA, one a kubeconfig.
	run(t, kubeconfigBuiltin{}, env, kubeconfigArgs("https://127.0.0.1:6443"))
	kubeconfig := filepath.Join(env.WorkDir, "kubeconfig/admin.conf")
	res = run(t, ci, env, step.Args{"paths": []any{filepath.Join(dir, "node.crt"), filepath.Join(dir, "gone.crt"),
		filepath.Join(dir, "ca.crt"), kubeconfig}, "missing_ok": true})
	certs := res.Data["certs"].([]any)
	if len(certs) != 4 {
		t.Fatalf("certs %v", certs)
	}
	check(t, certs[0].(map[string]any), filepath.Join(dir, "node.crt"))
	if m := certs[1].(map[string]any); m["exists"] != false || m["path"] != filepath.Join(dir, "gone.crt") {
		t.Errorf("missing file: %v", m)
	}
	if m := certs[2].(map[string]any); m["is_ca"] != true || m["common_name"] != "kubernetes" || m["days_left"].(int) < 3649 {
		t.Errorf("CA: %v", m)
	}
	if m := certs[3].(map[string]any); m["common_name"] != "kubernetes-admin" || m["path"] != kubeconfig || m["kind"] != "kubeconfig" {
		t.Errorf("kubeconfig: %v", m)
	}
	if m := certs[0].(map[string]any); m["kind"] != "certificate" {
		t.Errorf("certificate kind: %v", m["kind"])
	}

	// A service-account public key: type and fingerprint, the same for
	// both reads of the pair's public half.
	run(t, genCert{}, env, step.Args{"path": "certs/kubernetes", "name": "sa", "key_only": true})
	pub := run(t, ci, env, step.Args{"path": filepath.Join(dir, "sa.pub")}).Data
	if pub["kind"] != "public-key" || pub["key_type"] != "rsa2048" || len(pub["fingerprint"].(string)) != 64 || pub["exists"] != true {
		t.Errorf("public key: %v", pub)
	}
	if _, ok := pub["not_after"]; ok {
		t.Errorf("a public key has no expiry: %v", pub)
	}
}

func TestCertInfoExpiredAndErrors(t *testing.T) {
	env := testEnv(t)
	env.Target = local.New("localhost")
	dir := filepath.Join(env.WorkDir, "pki")
	ca := writePair(t, dir, "ca", Request{CommonName: "old-ca", IsCA: true, Validity: 365 * day}, nil, time.Now().Add(-400*day))
	writePair(t, dir, "old", Request{CommonName: "old", ExtKeyUsage: nil, Validity: 30 * day}, ca, time.Now().Add(-40*day))
	ci := certInfo{}
	d := run(t, ci, env, step.Args{"path": filepath.Join(dir, "old.crt")}).Data
	if d["expired"] != true || d["days_left"].(int) != -10 {
		t.Errorf("expired certificate: expired=%v days_left=%v", d["expired"], d["days_left"])
	}

	if err := os.WriteFile(filepath.Join(dir, "junk.crt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args step.Args
		want string
	}{
		{step.Args{"path": filepath.Join(dir, "none.crt")}, "does not exist on localhost"},
		{step.Args{"path": "pki/old.crt"}, "must be absolute"},
		{step.Args{"path": filepath.Join(dir, "junk.crt")}, "neither a PEM certificate nor a kubeconfig"},
		{step.Args{"path": dir}, "is a directory"},
		{step.Args{}, "path (or paths) is required"},
		{step.Args{"path": "a", "paths": []any{"b"}}, "not both"},
	} {
		_, err := call(ci, env, tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	env.Target = nil
	if _, err := call(ci, env, step.Args{"path": "/etc/x.crt"}); err == nil || !strings.Contains(err.Error(), "no connection") {
		t.Errorf("nil target: %v", err)
	}
}

// renew_before marks what a renewal timer would renew: a certificate within
// the window or expired, not one with time left, not a missing file.
func TestCertInfoRenewBefore(t *testing.T) {
	env := testEnv(t)
	env.Target = local.New("localhost")
	dir := filepath.Join(env.WorkDir, "pki")
	ca := writePair(t, dir, "ca", Request{CommonName: "ca", IsCA: true, Validity: 3650 * day}, nil, time.Now().Add(-day))
	writePair(t, dir, "soon", Request{CommonName: "soon", Validity: 30 * day}, ca, time.Now().Add(-10*day))
	writePair(t, dir, "fresh", Request{CommonName: "fresh", Validity: 365 * day}, ca, time.Now().Add(-day))
	writePair(t, dir, "gone", Request{CommonName: "gone", Validity: 10 * day}, ca, time.Now().Add(-20*day))
	ci := certInfo{}
	paths := func(names ...string) []any {
		var l []any
		for _, n := range names {
			l = append(l, filepath.Join(dir, n+".crt"))
		}
		return l
	}

	d := run(t, ci, env, step.Args{"paths": paths("fresh", "soon", "missing"), "missing_ok": true, "renew_before": "30d"}).Data
	certs := d["certs"].([]any)
	if d["due"] != true || certs[0].(map[string]any)["due"] != false || certs[1].(map[string]any)["due"] != true {
		t.Errorf("30d window: due %v, fresh %v, soon %v", d["due"], certs[0].(map[string]any)["due"], certs[1].(map[string]any)["due"])
	}
	if _, ok := certs[2].(map[string]any)["due"]; ok {
		t.Errorf("a missing file has no due: %v", certs[2])
	}
	if d := run(t, ci, env, step.Args{"paths": paths("fresh", "soon"), "renew_before": "7d"}).Data; d["due"] != false {
		t.Errorf("7d window: due %v, want false (soon has 20 days left)", d["due"])
	}
	if d := run(t, ci, env, step.Args{"path": filepath.Join(dir, "gone.crt"), "renew_before": "0s"}).Data; d["due"] != true {
		t.Errorf("an expired certificate is due: %v", d["due"])
	}
	if d := run(t, ci, env, step.Args{"path": filepath.Join(dir, "fresh.crt"), "renew_before": "400d"}).Data; d["due"] != true {
		t.Errorf("a window longer than the lifetime makes it due: %v", d["due"])
	}
	if d := run(t, ci, env, step.Args{"path": filepath.Join(dir, "fresh.crt")}).Data; d["due"] != nil {
		t.Errorf("due without renew_before: %v", d["due"])
	}
	for _, bad := range []any{"soon", "-3d"} {
		if _, err := call(ci, env, step.Args{"path": filepath.Join(dir, "fresh.crt"), "renew_before": bad}); err == nil || !strings.Contains(err.Error(), "renew_before") {
			t.Errorf("renew_before %v: %v", bad, err)
		}
	}
}

func TestCertInfoFingerprintsOfABundle(t *testing.T) {
	env := testEnv(t)
	dir := clusterPKI(t, env)
	run(t, genCert{}, env, step.Args{"path": "certs/other", "name": "ca", "ca": true, "common_name": "other"})
	one, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	two, err := os.ReadFile(filepath.Join(env.WorkDir, "certs/other/ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(env.WorkDir, "bundle.crt")
	if err := os.WriteFile(bundle, append(append([]byte{}, one...), two...), 0o644); err != nil {
		t.Fatal(err)
	}
	fp := func(p string) string {
		return CertFingerprint(readCert(t, p))
	}
	d := run(t, certInfo{}, env, step.Args{"path": bundle, "local": true}).Data
	want := []any{fp(filepath.Join(dir, "ca.crt")), fp(filepath.Join(env.WorkDir, "certs/other/ca.crt"))}
	if !slices.Equal(d["fingerprints"].([]any), want) || d["fingerprint"] != want[0] || want[0] == want[1] {
		t.Errorf("bundle: fingerprint %v, fingerprints %v; want %v", d["fingerprint"], d["fingerprints"], want)
	}
	if len(want[0].(string)) != 64 {
		t.Errorf("fingerprint %q is not a hex SHA-256", want[0])
	}
}
