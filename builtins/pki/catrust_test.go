package pki

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/engine/step"
)

func bundleCerts(t *testing.T, path string) []*x509.Certificate {
	t.Helper()
	certs, err := ParseCerts(readFile(t, path))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return certs
}

func verifies(leaf *x509.Certificate, roots ...*x509.Certificate) bool {
	_, err := leaf.Verify(x509.VerifyOptions{Roots: certPoolOf(roots...), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err == nil
}

// A whole rotation: the bundle holds the old CA, then both, then the new
// one alone; gen_cert reissues a leaf from the new CA once it is promoted;
// every stage run twice changes nothing the second time.
func TestCATrustRotation(t *testing.T) {
	env := testEnv(t)
	dir := filepath.Join(env.WorkDir, "certs/kubernetes")
	ca := step.Args{"path": "certs/kubernetes", "name": "ca", "ca": true, "common_name": "kubernetes", "key_type": "ecdsa-p256"}
	leaf := step.Args{"path": "certs/kubernetes", "name": "apiserver", "common_name": "kube-apiserver", "usages": []any{"server"}, "key_type": "ecdsa-p256"}
	run(t, genCert{}, env, ca)
	run(t, genCert{}, env, leaf)
	oldCA := readCert(t, filepath.Join(dir, "ca.crt"))
	bundle := filepath.Join(dir, "ca-bundle.crt")

	stage := func(name string, wantChanged bool, wantRotation string, wantCAs int) step.Result {
		t.Helper()
		res := run(t, caTrust{}, env, step.Args{"path": "certs/kubernetes", "stage": name})
		if res.Changed != wantChanged || res.Data["rotation"] != wantRotation || res.Data["cas"] != wantCAs {
			t.Fatalf("stage %s: changed %v rotation %v cas %v (%s), want %v %s %d", name, res.Changed, res.Data["rotation"], res.Data["cas"], res.Msg, wantChanged, wantRotation, wantCAs)
		}
		if got := len(bundleCerts(t, bundle)); got != wantCAs {
			t.Fatalf("stage %s: the bundle holds %d CAs, want %d", name, got, wantCAs)
		}
		return res
	}
	stage("bundle", true, "none", 1)
	stage("bundle", false, "none", 1)
	stage("retire", false, "none", 1)
	stage("promote", false, "none", 1)

	stage("add", true, "added", 2)
	stage("add", false, "added", 2)
	next := readCert(t, filepath.Join(dir, "ca-next.crt"))
	if next.Subject.CommonName != "kubernetes" || KeyTypeOf(next.PublicKey) != ECDSAP256 || !next.IsCA {
		t.Fatalf("new CA %s %s CA=%v, want kubernetes ecdsa-p256 CA", next.Subject.CommonName, KeyTypeOf(next.PublicKey), next.IsCA)
	}
	if b := bundleCerts(t, bundle); !b[0].Equal(oldCA) || !b[1].Equal(next) {
		t.Fatal("during add the bundle must be the current CA, then the new one")
	}
	// The leaf still fits: nothing signs with the new CA yet.
	if res := run(t, genCert{}, env, leaf); res.Changed {
		t.Fatalf("gen_cert reissued the leaf before the promote: %s", res.Msg)
	}

	stage("promote", true, "promoted", 2)
	stage("promote", false, "promoted", 2)
	stage("add", false, "promoted", 2) // a rotation is under way
	if cur := readCert(t, filepath.Join(dir, "ca.crt")); !cur.Equal(next) {
		t.Fatal("ca.crt is not the new CA after the promote")
	}
	if b := bundleCerts(t, bundle); !b[0].Equal(next) || !b[1].Equal(oldCA) {
		t.Fatal("after the promote the bundle must be the new CA, then the old one")
	}
	res := run(t, genCert{}, env, leaf)
	if !res.Changed || !strings.Contains(res.Msg, "not signed by the CA") {
		t.Fatalf("gen_cert after the promote: %s", res.Msg)
	}
	renewed := readCert(t, filepath.Join(dir, "apiserver.crt"))
	if !verifies(renewed, next) || verifies(renewed, oldCA) {
		t.Fatal("the reissued leaf does not chain to the new CA alone")
	}

	stage("retire", true, "none", 1)
	stage("retire", false, "none", 1)
	if b := bundleCerts(t, bundle); !b[0].Equal(next) {
		t.Fatal("after retire the bundle must be the new CA alone")
	}
	baks, _ := filepath.Glob(filepath.Join(dir, "ca-old.*.bak"))
	if len(baks) != 2 {
		t.Fatalf("the old CA is kept as 2 backups, have %v", baks)
	}
}

// rotationUnderWay makes a CA in <work dir>/pki and adds its successor.
func rotationUnderWay(t *testing.T) (*step.Env, string) {
	t.Helper()
	env := testEnv(t)
	run(t, genCert{}, env, step.Args{"path": "pki", "name": "ca", "ca": true, "common_name": "etcd-ca", "key_type": "ecdsa-p256"})
	run(t, caTrust{}, env, step.Args{"path": "pki", "stage": "add"})
	return env, filepath.Join(env.WorkDir, "pki")
}

// A promote interrupted after one rename: the other stages refuse the
// directory with a hint, and the next promote finishes it.
func TestCATrustInterruptedPromote(t *testing.T) {
	env, dir := rotationUnderWay(t)
	next := readCert(t, filepath.Join(dir, "ca-next.crt"))
	// What the promote does for the certificate, without the key.
	if err := os.Rename(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca-old.crt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "ca-next.crt"), filepath.Join(dir, "ca.crt")); err != nil {
		t.Fatal(err)
	}
	for _, st := range []string{"bundle", "add", "retire"} {
		_, err := call(caTrust{}, env, step.Args{"path": "pki", "stage": st})
		if err == nil || !strings.Contains(err.Error(), "stage: promote or retire finishes it") {
			t.Fatalf("stage %s on a half-promoted CA: %v", st, err)
		}
	}
	res := run(t, caTrust{}, env, step.Args{"path": "pki", "stage": "promote"})
	if !res.Changed || res.Data["rotation"] != "promoted" {
		t.Fatalf("finishing the promote: %+v", res)
	}
	if b := bundleCerts(t, filepath.Join(dir, "ca-bundle.crt")); len(b) != 2 || !b[0].Equal(next) {
		t.Fatal("after the finished promote the bundle is not the new CA, then the old one")
	}
}

func TestCATrustCheckModeWritesNothing(t *testing.T) {
	env := testEnv(t)
	dir := filepath.Join(env.WorkDir, "pki")
	run(t, genCert{}, env, step.Args{"path": "pki", "name": "ca", "ca": true, "common_name": "c", "key_type": "ecdsa-p256"})
	env.Check = true
	for _, st := range []string{"bundle", "add"} {
		if res := run(t, caTrust{}, env, step.Args{"path": "pki", "stage": st}); !res.Changed || !strings.HasPrefix(res.Msg, "would ") {
			t.Fatalf("check mode, stage %s: %+v", st, res)
		}
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "ca.crt ca.key" {
		t.Fatalf("check mode wrote files: %v", names)
	}
	if res := run(t, caTrust{}, env, step.Args{"path": "nothing-here"}); !res.Changed || !strings.Contains(res.Msg, "once the CA") {
		t.Fatalf("check mode, a directory without a CA yet: %+v", res)
	}
	env.Check = false
	if _, err := call(caTrust{}, env, step.Args{"path": "nothing-here"}); err == nil || !strings.Contains(err.Error(), "gen_cert") {
		t.Fatalf("a directory without a CA: %v", err)
	}
}

// A retire interrupted after one rename: the next retire moves the key too.
func TestCATrustInterruptedRetire(t *testing.T) {
	env, dir := rotationUnderWay(t)
	run(t, caTrust{}, env, step.Args{"path": "pki", "stage": "promote"})
	if err := os.Rename(filepath.Join(dir, "ca-old.crt"), filepath.Join(dir, "ca-old.crt.x.bak")); err != nil {
		t.Fatal(err)
	}
	if _, err := call(caTrust{}, env, step.Args{"path": "pki"}); err == nil || !strings.Contains(err.Error(), "retire finishes it") {
		t.Fatalf("a half-retired CA: %v", err)
	}
	res := run(t, caTrust{}, env, step.Args{"path": "pki", "stage": "retire"})
	if !res.Changed || res.Data["rotation"] != "none" || res.Data["cas"] != 1 {
		t.Fatalf("finishing the retire: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(dir, "ca-old.key")); !os.IsNotExist(err) {
		t.Fatalf("ca-old.key is still there: %v", err)
	}
}

// A finished rotation whose ca-next and ca-old came back (an older kubexm
// kept them in the masters' copy of the PKI, which the next run took): the
// leftovers are removed, not read as a rotation stopped halfway; --check
// says so and removes nothing; a half-done rotation's files are never taken
// for leftovers.
func TestCATrustLeftoversOfAFinishedRotation(t *testing.T) {
	env, dir := rotationUnderWay(t)
	keep := map[string][]byte{}
	save := func(names ...string) {
		for _, n := range names {
			keep[n] = readFile(t, filepath.Join(dir, n))
		}
	}
	save("ca-next.crt", "ca-next.key")
	run(t, caTrust{}, env, step.Args{"path": "pki", "stage": "promote"})
	save("ca-old.crt", "ca-old.key")
	run(t, caTrust{}, env, step.Args{"path": "pki", "stage": "retire"})
	newCA := readCert(t, filepath.Join(dir, "ca.crt"))
	restore := func() {
		t.Helper()
		for n, data := range keep {
			if err := os.WriteFile(filepath.Join(dir, n), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	restore()

	env.Check = true
	res := run(t, caTrust{}, env, step.Args{"path": "pki"})
	if !res.Changed || !strings.Contains(res.Msg, "would remove the leftover ca-next.crt (already promoted), remove the leftover ca-old.crt (already retired)") {
		t.Fatalf("check mode with the leftovers: %+v", res)
	}
	for n := range keep {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Fatalf("check mode removed %s: %v", n, err)
		}
	}
	env.Check = false
	res = run(t, caTrust{}, env, step.Args{"path": "pki"})
	if !res.Changed || res.Data["rotation"] != "none" || res.Data["cas"] != 1 {
		t.Fatalf("the leftovers: %+v", res)
	}
	for n := range keep {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			t.Fatalf("%s was left", n)
		}
	}
	if b := bundleCerts(t, filepath.Join(dir, "ca-bundle.crt")); len(b) != 1 || !b[0].Equal(newCA) {
		t.Fatal("the bundle is not the new CA alone")
	}
	if res := run(t, caTrust{}, env, step.Args{"path": "pki"}); res.Changed {
		t.Fatalf("a second run changed: %s", res.Msg)
	}

	// ca-old of another CA than the backups hold, beside a ca-next that
	// is not ca.crt: a real inconsistency, refused as before.
	other, _ := rotationUnderWay(t)
	otherDir := filepath.Join(other.WorkDir, "pki")
	for _, ext := range []string{"crt", "key"} {
		if err := os.WriteFile(filepath.Join(otherDir, "ca-old."+ext), readFile(t, filepath.Join(otherDir, "ca."+ext)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := call(caTrust{}, other, step.Args{"path": "pki"}); err == nil || !strings.Contains(err.Error(), "both") {
		t.Fatalf("next and old of a rotation under way: %v", err)
	}
}
