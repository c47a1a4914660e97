package pki

import (
	"bytes"
	"context"
	"crypto/x509"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/engine/step"
)

func testEnv(t *testing.T) *step.Env {
	t.Helper()
	return &step.Env{Host: "node1", WorkDir: t.TempDir(), Logf: t.Logf}
}

// call runs b as the engine does: with its Spec's defaults.
func call(b step.Builtin, env *step.Env, args step.Args) (step.Result, error) {
	return b.Run(context.Background(), env, b.Spec().WithDefaults(args))
}

func run(t *testing.T, b step.Builtin, env *step.Env, args step.Args) step.Result {
	t.Helper()
	res, err := call(b, env, args)
	if err != nil {
		t.Fatalf("%s %v: %v", b.Spec().Name, args, err)
	}
	return res
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseCert(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// requireOpenSSL returns the openssl binary. The chain tests are only
// meaningful with it, so its absence fails them outside -short.
func requireOpenSSL(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("openssl")
	if err != nil {
		if testing.Short() {
			t.Skip("openssl not installed (-short)")
		}
		t.Fatal("openssl is needed to cross-check the certificates (apt-get install openssl), or run with -short")
	}
	return p
}

func openssl(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("openssl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func caArgs(dir string) step.Args {
	return step.Args{"path": dir, "name": "ca", "ca": true, "common_name": "etcd-ca"}
}

func TestChainVerifiesWithGoAndOpenSSL(t *testing.T) {
	bin := requireOpenSSL(t)
	env := testEnv(t)
	g := genCert{}
	if res := run(t, g, env, step.Args{"path": "certs/kubernetes", "name": "ca", "ca": true,
		"common_name": "kubernetes", "key_type": "rsa4096"}); !res.Changed {
		t.Fatalf("CA not reported changed: %+v", res)
	}
	leaves := []struct {
		name, keyType string
		usages        []any
		org           []any
		eku           []x509.ExtKeyUsage
		purpose       []string
	}{
		{"apiserver", "rsa2048", []any{"server"}, nil, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, []string{"sslserver"}},
		{"admin", "ecdsa-p256", []any{"client"}, []any{"system:masters"}, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, []string{"sslclient"}},
		{"member-node1", "rsa2048", []any{"peer"}, nil, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, []string{"sslserver", "sslclient"}},
	}
	dir := filepath.Join(env.WorkDir, "certs/kubernetes")
	ca := readCert(t, filepath.Join(dir, "ca.crt"))
	if !ca.IsCA || ca.Subject.CommonName != "kubernetes" || KeyTypeOf(ca.PublicKey) != RSA4096 {
		t.Fatalf("CA: is_ca=%v cn=%q key=%s", ca.IsCA, ca.Subject.CommonName, KeyTypeOf(ca.PublicKey))
	}
	if got := ca.NotAfter.Sub(ca.NotBefore); got < 10*365*day || got > 10*365*day+time.Hour {
		t.Errorf("CA lifetime %s, want 10 years", got)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, l := range leaves {
		res := run(t, g, env, step.Args{"path": "certs/kubernetes", "name": l.name, "common_name": l.name,
			"organization": l.org, "usages": l.usages, "key_type": l.keyType,
			"sans": []any{"kubernetes.default.svc", "node1", "10.96.0.1, 127.0.0.1", []any{"::1", nil}}})
		if !res.Changed || res.Data["cert"] != filepath.Join(dir, l.name+".crt") {
			t.Fatalf("%s: %+v", l.name, res)
		}
		crtPath, keyPath := filepath.Join(dir, l.name+".crt"), filepath.Join(dir, l.name+".key")
		c := readCert(t, crtPath)
		if c.IsCA || KeyTypeOf(c.PublicKey) != KeyType(l.keyType) {
			t.Errorf("%s: is_ca=%v key=%s", l.name, c.IsCA, KeyTypeOf(c.PublicKey))
		}
		if !slices.Equal(c.ExtKeyUsage, l.eku) {
			t.Errorf("%s: ext key usage %v, want %v", l.name, c.ExtKeyUsage, l.eku)
		}
		if !slices.Equal(c.DNSNames, []string{"kubernetes.default.svc", "node1"}) || len(c.IPAddresses) != 3 ||
			!c.IPAddresses[0].Equal(net.ParseIP("10.96.0.1")) || !c.IPAddresses[2].Equal(net.IPv6loopback) {
			t.Errorf("%s: SANs dns=%v ip=%v", l.name, c.DNSNames, c.IPAddresses)
		}
		if got := c.NotAfter.Sub(c.NotBefore); got < 365*day || got > 365*day+time.Hour {
			t.Errorf("%s: lifetime %s, want 1 year", l.name, got)
		}
		if !slices.Equal(c.Subject.Organization, toStrings(l.org)) {
			t.Errorf("%s: O=%v", l.name, c.Subject.Organization)
		}
		if _, err := c.Verify(x509.VerifyOptions{Roots: roots, DNSName: "node1", KeyUsages: l.eku}); err != nil {
			t.Errorf("%s: crypto/x509 verify: %v", l.name, err)
		}
		out := openssl(t, bin, "verify", "-CAfile", filepath.Join(dir, "ca.crt"), crtPath)
		if !strings.Contains(out, ": OK") {
			t.Errorf("%s: openssl verify: %s", l.name, out)
		}
		for _, p := range l.purpose {
			openssl(t, bin, "verify", "-purpose", p, "-CAfile", filepath.Join(dir, "ca.crt"), crtPath)
		}
		// openssl must read the key and find it is the certificate's.
		certPub := openssl(t, bin, "x509", "-noout", "-pubkey", "-in", crtPath)
		keyPub := openssl(t, bin, "pkey", "-pubout", "-in", keyPath)
		if certPub != keyPub {
			t.Errorf("%s: openssl sees a key that does not match the certificate", l.name)
		}
		assertMode(t, keyPath, 0o600)
		assertMode(t, crtPath, 0o644)
	}
	assertMode(t, dir, 0o755)
	assertMode(t, filepath.Join(dir, "ca.key"), 0o600)
	// A leaf signed by another CA must not verify.
	other := filepath.Join(env.WorkDir, "other")
	run(t, g, env, caArgs(other))
	if out, err := exec.Command(bin, "verify", "-CAfile", filepath.Join(other, "ca.crt"), filepath.Join(dir, "apiserver.crt")).CombinedOutput(); err == nil {
		t.Errorf("openssl verified a leaf against the wrong CA: %s", out)
	}
}

func toStrings(l []any) []string {
	var out []string
	for _, v := range l {
		out = append(out, v.(string))
	}
	return out
}

func assertMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != want {
		t.Errorf("%s: mode %04o, want %04o", path, fi.Mode().Perm(), want)
	}
}

func leafArgs(dir string, sans ...any) step.Args {
	return step.Args{"path": dir, "name": "server", "common_name": "etcd-server", "usages": []any{"server"}, "sans": sans}
}

func TestGenCertIdempotent(t *testing.T) {
	env := testEnv(t)
	g := genCert{}
	run(t, g, env, caArgs("etcd"))
	run(t, g, env, leafArgs("etcd", "a.example", "10.0.0.1"))
	dir := filepath.Join(env.WorkDir, "etcd")
	before := map[string][]byte{}
	for _, f := range []string{"ca.crt", "ca.key", "server.crt", "server.key"} {
		before[f] = readFile(t, filepath.Join(dir, f))
	}
	for _, args := range []step.Args{caArgs("etcd"), leafArgs("etcd", "a.example", "10.0.0.1"),
		// SANs in another order, a wanted subset, and a different case all still fit.
		leafArgs("etcd", "10.0.0.1", "A.example"), leafArgs("etcd", "a.example")} {
		if res := run(t, g, env, args); res.Changed {
			t.Fatalf("second run of %v changed: %s", args, res.Msg)
		}
	}
	for f, b := range before {
		if !bytes.Equal(b, readFile(t, filepath.Join(dir, f))) {
			t.Errorf("%s was rewritten", f)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 4 {
		t.Errorf("want 4 files, got %v", entries)
	}
}

func backups(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.bak"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m
}

func TestGenCertReissueOnSANChange(t *testing.T) {
	env := testEnv(t)
	g := genCert{}
	dir := filepath.Join(env.WorkDir, "etcd")
	run(t, g, env, caArgs("etcd"))
	run(t, g, env, leafArgs("etcd", "a.example", "10.0.0.1"))
	oldCrt, oldKey := readFile(t, filepath.Join(dir, "server.crt")), readFile(t, filepath.Join(dir, "server.key"))

	res := run(t, g, env, leafArgs("etcd", "a.example", "10.0.0.1", "10.0.0.2"))
	if !res.Changed || !strings.Contains(res.Msg, "SAN 10.0.0.2 is missing") || !strings.Contains(res.Msg, "reissue") {
		t.Fatalf("SAN change: %+v", res)
	}
	c := readCert(t, filepath.Join(dir, "server.crt"))
	if len(c.IPAddresses) != 2 || !c.IPAddresses[1].Equal(net.ParseIP("10.0.0.2")) {
		t.Errorf("new SANs %v", c.IPAddresses)
	}
	if bytes.Equal(oldKey, readFile(t, filepath.Join(dir, "server.key"))) {
		t.Error("reissue kept the old key")
	}
	bak := backups(t, dir)
	if len(bak) != 2 {
		t.Fatalf("backups %v", bak)
	}
	for _, b := range bak {
		want := oldCrt
		if strings.HasPrefix(b, "server.key.") {
			want = oldKey
			assertMode(t, filepath.Join(dir, b), 0o600)
		} else if !strings.HasPrefix(b, "server.crt.") {
			t.Errorf("unexpected backup %s", b)
		}
		if !bytes.Equal(want, readFile(t, filepath.Join(dir, b))) {
			t.Errorf("%s does not hold the old content", b)
		}
	}
	// The reissued pair verifies and a rerun keeps it.
	roots := x509.NewCertPool()
	roots.AddCert(readCert(t, filepath.Join(dir, "ca.crt")))
	if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Error(err)
	}
	if res := run(t, g, env, leafArgs("etcd", "a.example", "10.0.0.1", "10.0.0.2")); res.Changed {
		t.Errorf("rerun after reissue changed: %s", res.Msg)
	}
	// A second reissue in the same second must not overwrite the first backup.
	run(t, g, env, leafArgs("etcd", "a.example", "10.0.0.3"))
	if got := backups(t, dir); len(got) != 4 {
		t.Errorf("after two reissues, backups %v", got)
	}
}

func TestGenCertReissuesOnOtherChanges(t *testing.T) {
	env := testEnv(t)
	g := genCert{}
	run(t, g, env, caArgs("etcd"))
	base := leafArgs("etcd", "a.example")
	run(t, g, env, base)
	with := func(k string, v any) step.Args {
		a := step.Args{}
		for kk, vv := range base {
			a[kk] = vv
		}
		a[k] = v
		return a
	}
	for _, tc := range []struct {
		args step.Args
		why  string
	}{
		{with("common_name", "other"), `common name is "etcd-server", want "other"`},
		{with("organization", []any{"system:masters"}), "organization"},
		{with("usages", []any{"peer"}), "usage client is missing"},
		{with("key_type", "ecdsa-p256"), "key type is rsa2048, want ecdsa-p256"},
	} {
		res := run(t, g, env, tc.args)
		if !res.Changed || !strings.Contains(res.Msg, tc.why) {
			t.Errorf("%v: want a reissue because %q, got %+v", tc.args, tc.why, res)
		}
		// Put the base certificate back for the next case.
		run(t, g, env, base)
	}
	// A new CA (another CN) makes the leaf misfit: it is no longer signed by it.
	res := run(t, g, env, step.Args{"path": "etcd", "name": "ca", "ca": true, "common_name": "etcd-ca-2"})
	if !res.Changed {
		t.Fatal("CA with a new CN was kept")
	}
	res = run(t, g, env, base)
	if !res.Changed || !strings.Contains(res.Msg, "not signed by the CA") {
		t.Errorf("leaf after CA change: %+v", res)
	}
}

// writePair issues a certificate as if it had been made at issued.
func writePair(t *testing.T, dir, name string, req Request, ca *Pair, issued time.Time) *Pair {
	t.Helper()
	key, err := GenerateKey(RSA2048)
	if err != nil {
		t.Fatal(err)
	}
	cert, der, err := Issue(req, key, ca, issued)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := EncodeKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeAtomic(filepath.Join(dir, name+".key"), keyPEM, modeKey); err != nil {
		t.Fatal(err)
	}
	if err := writeAtomic(filepath.Join(dir, name+".crt"), EncodeCert(der), modeCert); err != nil {
		t.Fatal(err)
	}
	return &Pair{Cert: cert, Key: key}
}

func TestGenCertRenewWindow(t *testing.T) {
	env := testEnv(t)
	g := genCert{}
	dir := filepath.Join(env.WorkDir, "pki")
	now := time.Now()
	ca := writePair(t, dir, "ca", Request{CommonName: "ca", IsCA: true, Validity: 10 * 365 * day}, nil, now)
	leaf := Request{CommonName: "etcd-server", ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, Validity: 365 * day}
	args := step.Args{"path": "pki", "name": "server", "common_name": "etcd-server", "usages": []any{"server"}}

	// Issued 340 days ago: 25 days left, inside the default 30-day window.
	writePair(t, dir, "server", leaf, ca, now.Add(-340*day))
	res := run(t, g, env, args)
	if !res.Changed || !strings.Contains(res.Msg, "within the renew window of 30d") {
		t.Fatalf("inside renew window: %+v", res)
	}
	c := readCert(t, filepath.Join(dir, "server.crt"))
	if d := time.Until(c.NotAfter); d < 364*day {
		t.Errorf("renewed certificate has only %s left", d)
	}

	// Issued 300 days ago: 65 days left, kept by default, renewed with renew_before 90d.
	writePair(t, dir, "server", leaf, ca, now.Add(-300*day))
	if res := run(t, g, env, args); res.Changed {
		t.Fatalf("outside renew window reissued: %s", res.Msg)
	}
	args["renew_before"] = "90d"
	if res := run(t, g, env, args); !res.Changed {
		t.Fatal("renew_before 90d did not reissue a certificate with 65 days left")
	}

	// Expired.
	writePair(t, dir, "server", leaf, ca, now.Add(-400*day))
	if res := run(t, g, env, args); !res.Changed || !strings.Contains(res.Msg, "expired") {
		t.Fatalf("expired: %+v", res)
	}

	// Validity and renew_before in the accepted forms.
	args = step.Args{"path": "pki", "name": "short", "common_name": "x", "usages": []any{"client"}, "validity": "48h", "renew_before": 3600}
	run(t, g, env, args)
	c = readCert(t, filepath.Join(dir, "short.crt"))
	if got := c.NotAfter.Sub(c.NotBefore); got != 48*time.Hour+clockSkew {
		t.Errorf("validity 48h gave %s", got)
	}
}

// force reissues a fitting leaf from the same CA every time, and a run
// without it keeps the result.
func TestGenCertForce(t *testing.T) {
	env := testEnv(t)
	g := genCert{}
	run(t, g, env, caArgs("pki"))
	dir := filepath.Join(env.WorkDir, "pki")
	caBefore := readFile(t, filepath.Join(dir, "ca.crt"))
	args := step.Args{"path": "pki", "name": "server", "common_name": "etcd-server", "usages": []any{"server"}}
	run(t, g, env, args)
	first := readCert(t, filepath.Join(dir, "server.crt"))
	firstKey := readFile(t, filepath.Join(dir, "server.key"))

	args["force"] = true
	env.Check = true
	if res := run(t, g, env, args); !res.Changed || !strings.Contains(res.Msg, "would reissue") {
		t.Fatalf("check mode with force: %+v", res)
	}
	if c := readCert(t, filepath.Join(dir, "server.crt")); c.SerialNumber.Cmp(first.SerialNumber) != 0 {
		t.Fatal("check mode wrote a certificate")
	}
	env.Check = false
	res := run(t, g, env, args)
	if !res.Changed || !strings.Contains(res.Msg, "renewal forced") {
		t.Fatalf("force: %+v", res)
	}
	second := readCert(t, filepath.Join(dir, "server.crt"))
	if second.SerialNumber.Cmp(first.SerialNumber) == 0 || bytes.Equal(readFile(t, filepath.Join(dir, "server.key")), firstKey) {
		t.Error("force kept the serial or the key")
	}
	ca := readCert(t, filepath.Join(dir, "ca.crt"))
	if err := second.CheckSignatureFrom(ca); err != nil || !bytes.Equal(readFile(t, filepath.Join(dir, "ca.crt")), caBefore) {
		t.Errorf("renewed leaf not signed by the unchanged CA: %v", err)
	}
	delete(args, "force")
	if res := run(t, g, env, args); res.Changed {
		t.Errorf("a run without force after a forced renewal changed: %s", res.Msg)
	}
}

func TestGenCertCheckMode(t *testing.T) {
	env := testEnv(t)
	env.Check = true
	g := genCert{}
	res := run(t, g, env, caArgs("etcd"))
	if !res.Changed || !strings.HasPrefix(res.Msg, "would create") {
		t.Fatalf("check CA: %+v", res)
	}
	// The leaf's CA was not made either; check mode still reports.
	res = run(t, g, env, leafArgs("etcd", "a.example"))
	if !res.Changed || !strings.Contains(res.Msg, "does not exist yet") {
		t.Fatalf("check leaf: %+v", res)
	}
	res = run(t, g, env, step.Args{"path": "etcd", "name": "sa", "key_only": true})
	if !res.Changed {
		t.Fatalf("check key pair: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(env.WorkDir, "etcd")); !os.IsNotExist(err) {
		t.Fatalf("check mode created the directory: %v", err)
	}

	env.Check = false
	run(t, g, env, caArgs("etcd"))
	run(t, g, env, leafArgs("etcd", "a.example"))
	dir := filepath.Join(env.WorkDir, "etcd")
	before := readFile(t, filepath.Join(dir, "server.crt"))
	env.Check = true
	res = run(t, g, env, leafArgs("etcd", "a.example", "b.example"))
	if !res.Changed || !strings.HasPrefix(res.Msg, "would reissue") || !strings.Contains(res.Msg, "SAN b.example is missing") {
		t.Fatalf("check reissue: %+v", res)
	}
	if !bytes.Equal(before, readFile(t, filepath.Join(dir, "server.crt"))) {
		t.Error("check mode rewrote the certificate")
	}
	if b := backups(t, dir); len(b) != 0 {
		t.Errorf("check mode made backups %v", b)
	}
	if res := run(t, g, env, leafArgs("etcd", "a.example")); res.Changed {
		t.Errorf("check of a fitting certificate: %+v", res)
	}
}

func TestGenCertKeyOnly(t *testing.T) {
	env := testEnv(t)
	g := genCert{}
	args := step.Args{"path": "certs/kubernetes", "name": "sa", "key_only": true}
	res := run(t, g, env, args)
	dir := filepath.Join(env.WorkDir, "certs/kubernetes")
	if !res.Changed || res.Data["pub"] != filepath.Join(dir, "sa.pub") {
		t.Fatalf("first run: %+v", res)
	}
	key, err := ParseKey(readFile(t, filepath.Join(dir, "sa.key")))
	if err != nil {
		t.Fatal(err)
	}
	wantPub, _ := EncodePublicKey(key.Public())
	if !bytes.Equal(wantPub, readFile(t, filepath.Join(dir, "sa.pub"))) {
		t.Error("sa.pub is not the public half of sa.key")
	}
	assertMode(t, filepath.Join(dir, "sa.key"), 0o600)
	assertMode(t, filepath.Join(dir, "sa.pub"), 0o644)
	if _, err := os.Stat(filepath.Join(dir, "sa.crt")); !os.IsNotExist(err) {
		t.Error("key_only wrote a certificate")
	}
	if res := run(t, g, env, args); res.Changed {
		t.Fatalf("second run changed: %s", res.Msg)
	}
	// A lost public key is derived again from the kept private key.
	os.Remove(filepath.Join(dir, "sa.pub"))
	keyBefore := readFile(t, filepath.Join(dir, "sa.key"))
	if res := run(t, g, env, args); !res.Changed {
		t.Fatal("missing sa.pub not rewritten")
	}
	if !bytes.Equal(keyBefore, readFile(t, filepath.Join(dir, "sa.key"))) || !bytes.Equal(wantPub, readFile(t, filepath.Join(dir, "sa.pub"))) {
		t.Error("rewriting sa.pub changed the key pair")
	}
	args["key_type"] = "ecdsa-p256"
	if res := run(t, g, env, args); !res.Changed {
		t.Fatal("key type change kept the key")
	}
	if len(backups(t, dir)) != 2 {
		t.Errorf("backups %v", backups(t, dir))
	}
}

func TestGenCertConcurrentHostsOneCA(t *testing.T) {
	env := testEnv(t)
	g := genCert{}
	var wg sync.WaitGroup
	results := make([]step.Result, 6)
	errs := make([]error, 6)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := *env
			results[i], errs[i] = call(g, &e, caArgs("etcd"))
		}()
	}
	wg.Wait()
	changed := 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if r.Changed {
			changed++
		}
	}
	if changed != 1 {
		t.Errorf("%d runs report changed, want 1", changed)
	}
	dir := filepath.Join(env.WorkDir, "etcd")
	if _, err := loadCA(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")); err != nil {
		t.Errorf("CA pair after concurrent runs: %v", err)
	}
	if b := backups(t, dir); len(b) != 0 {
		t.Errorf("backups %v", b)
	}
}

func TestGenCertBadInput(t *testing.T) {
	env := testEnv(t)
	g := genCert{}
	run(t, g, env, caArgs("etcd"))
	for _, tc := range []struct {
		args step.Args
		want string
	}{
		{step.Args{"path": "etcd", "name": "x", "usages": []any{"server"}}, "common_name is required"},
		{step.Args{"path": "etcd", "name": "a/b", "common_name": "x", "usages": []any{"server"}}, "plain file base name"},
		{step.Args{"path": "etcd", "name": "x", "common_name": "x"}, "usages is required"},
		{step.Args{"path": "etcd", "name": "x", "common_name": "x", "usages": []any{"serving"}}, `usage "serving" is not known`},
		{step.Args{"path": "etcd", "name": "x", "common_name": "x", "usages": []any{"server"}, "sans": []any{"10.0.0.0/24"}}, "neither an IP address nor a DNS name"},
		{step.Args{"path": "etcd", "name": "x", "common_name": "x", "usages": []any{"server"}, "key_type": "dsa"}, "not supported"},
		{step.Args{"path": "etcd", "name": "x", "common_name": "x", "usages": []any{"server"}, "validity": "soon"}, "validity"},
		{step.Args{"path": "etcd", "name": "x", "common_name": "x", "usages": []any{"server"}, "validity": "10d", "renew_before": "30d"}, "must be shorter than validity"},
		{step.Args{"path": "etcd", "name": "x", "common_name": "x", "usages": []any{"server"}, "ca_name": "nope"}, "gen_cert ca: true"},
		{step.Args{"path": "etcd", "name": "x", "common_name": "x", "ca": true, "usages": []any{"server"}}, "usages apply to leaf"},
		{step.Args{"path": "etcd", "name": "x", "ca": true, "key_only": true}, "exclude each other"},
		{step.Args{"path": "etcd", "name": "ca", "common_name": "x", "usages": []any{"client"}}, "overwrite its own CA"},
		{step.Args{"path": "etcd", "name": "x", "common_name": "x", "ca": true, "force": true}, "leaf certificates only"},
		{step.Args{"path": "etcd", "name": "sa", "key_only": true, "force": true}, "leaf certificates only"},
	} {
		_, err := call(g, env, tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want it to mention %q", tc.args, err, tc.want)
		}
	}
	// A CA certificate whose key belongs to another pair is refused.
	dir := filepath.Join(env.WorkDir, "etcd")
	run(t, g, env, step.Args{"path": "other", "name": "ca", "ca": true, "common_name": "o"})
	if err := os.WriteFile(filepath.Join(dir, "ca.key"), readFile(t, filepath.Join(env.WorkDir, "other", "ca.key")), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := call(g, env, leafArgs("etcd")); err == nil || !strings.Contains(err.Error(), "does not belong") {
		t.Errorf("mismatched CA key: %v", err)
	}
}

func TestParseValidity(t *testing.T) {
	for in, want := range map[any]time.Duration{
		"8760h": 8760 * time.Hour, "365d": 365 * day, "10y": 3650 * day, "1.5d": 36 * time.Hour,
		"90": 90 * time.Second, 60: time.Minute,
	} {
		got, err := ParseValidity(in)
		if err != nil || got != want {
			t.Errorf("ParseValidity(%v) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []any{"ten years", "-1d", "y", "3x"} {
		if _, err := ParseValidity(in); err == nil {
			t.Errorf("ParseValidity(%q) accepted", in)
		}
	}
}

func TestSpecsAreDocumented(t *testing.T) {
	names := map[string]bool{}
	for _, b := range Builtins() {
		s := b.Spec()
		names[s.Name] = true
		if s.Summary == "" || s.Doc == "" || len(s.Examples) == 0 {
			t.Errorf("%s: summary, doc and examples are needed for the docs", s.Name)
		}
		for _, a := range s.Args {
			if a.Doc == "" || a.Type == "" {
				t.Errorf("%s: argument %s lacks doc or type", s.Name, a.Name)
			}
		}
	}
	if !names["gen_cert"] || !names["ca_trust"] || !names["kubeconfig"] || !names["cert_info"] || len(names) != 4 {
		t.Errorf("builtins %v", names)
	}
	if !(genCert{}).Spec().Control || !(caTrust{}).Spec().Control || !(kubeconfigBuiltin{}).Spec().Control || (certInfo{}).Spec().Control {
		t.Error("gen_cert, ca_trust and kubeconfig run on the control machine, cert_info on the host")
	}
}
