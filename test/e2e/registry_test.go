//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/mensylisir/kubexm/test/testhosts"
)

// registryVersion is what test/artifacts/registry.sh builds.
const registryVersion = "3.1.2"

// testRegistry is a CNCF distribution registry the test runs on the test
// bridge's gateway: TLS from a CA of its own, htpasswd (bcrypt) auth.
type testRegistry struct {
	host   string // address:port
	caDir  string // a certs.d directory with the CA as ca.crt
	user   string
	passwd string
	// stop ends a registry startRegistry runs (nil for others); it may be
	// called again, and at the test's end.
	stop func()
}

// registryBinary builds (or takes from the cache) the registry with
// test/artifacts/registry.sh and returns its path.
func registryBinary(ctx context.Context, t *testing.T, root string) string {
	t.Helper()
	buildArtifact(ctx, t, root, []string{"REGISTRY_VERSION=" + registryVersion}, "registry.sh")
	cache := os.Getenv("KUBEXM_TEST_CACHE")
	if cache == "" {
		cache = "/var/cache/kubexm-test"
	}
	return filepath.Join(cache, "artifacts", "registry", registryVersion, "amd64", "registry")
}

// registryFiles writes into dir what a registry serving reg.host (ip:port)
// runs with: a CA of its own (reg.caDir/ca.crt), a certificate for ip, an
// htpasswd line (bcrypt) for reg.user, and registry.yml, which names the
// files and the storage under runDir, where the machine running the
// registry has them (dir itself on the control machine).
func registryFiles(t *testing.T, reg testRegistry, ip, dir, runDir string) {
	t.Helper()
	caPEM, certPEM, keyPEM := registryCerts(t, ip)
	if err := os.MkdirAll(reg.caDir, 0o700); err != nil {
		t.Fatal(err)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(reg.passwd), bcrypt.DefaultCost)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		filepath.Join(reg.caDir, "ca.crt"):      caPEM,
		filepath.Join(dir, "registry.crt"):      certPEM,
		filepath.Join(dir, "registry.key"):      keyPEM,
		filepath.Join(dir, "registry.htpasswd"): []byte(reg.user + ":" + string(hash) + "\n"),
		filepath.Join(dir, "registry.yml"): []byte(fmt.Sprintf(`version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: %q}
  delete: {enabled: true}
http:
  addr: %q
  tls: {certificate: %q, key: %q}
auth:
  htpasswd: {realm: kubexm-e2e, path: %q}
`, filepath.Join(runDir, "registry-data"), reg.host, filepath.Join(runDir, "registry.crt"), filepath.Join(runDir, "registry.key"), filepath.Join(runDir, "registry.htpasswd"))),
	}
	for p, b := range files {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// waitListening waits until something accepts connections on addr.
func waitListening(t *testing.T, addr string, log func() string) {
	t.Helper()
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if i == 100 {
			t.Fatalf("the registry does not listen on %s: %v\n%s", addr, err, log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startRegistry runs the registry on the control machine (on gateway, the
// test bridge's address) until the test ends.
func startRegistry(ctx context.Context, t *testing.T, root, gateway, dir string) testRegistry {
	t.Helper()
	bin := registryBinary(ctx, t, root)
	l, err := net.Listen("tcp", net.JoinHostPort(gateway, "0"))
	if err != nil {
		t.Fatal(err)
	}
	host := l.Addr().String()
	l.Close()
	reg := testRegistry{host: host, caDir: filepath.Join(dir, "registry-ca"), user: "pusher", passwd: "e2e-Registry-4"}
	registryFiles(t, reg, gateway, dir, dir)
	srv := exec.Command(bin, "serve", filepath.Join(dir, "registry.yml"))
	var log strings.Builder
	srv.Stdout, srv.Stderr = &log, &log
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	reg.stop = func() {
		once.Do(func() {
			_ = srv.Process.Kill()
			_ = srv.Wait()
		})
	}
	t.Cleanup(func() {
		reg.stop()
		if t.Failed() {
			t.Logf("registry log:\n%s", tail(log.String(), 40))
		}
	})
	waitListening(t, host, log.String)
	return reg
}

// registryRunDir is where startRegistryOn puts the registry on a test
// machine: outside every directory kubexm writes (the host's state before
// the create is taken with it there).
const registryRunDir = "/srv/e2e-registry"

// startRegistryOn runs the registry on a test machine, as the transient
// systemd unit e2e-registry.service, as a registry kubexm did not deploy:
// reg.host is the machine's address with port 5000; user and passwd its
// account.
func startRegistryOn(ctx context.Context, t *testing.T, set *testhosts.Set, h testhosts.Host, root, dir, user, passwd string) testRegistry {
	t.Helper()
	bin := registryBinary(ctx, t, root)
	reg := testRegistry{host: net.JoinHostPort(h.Address, "5000"), caDir: filepath.Join(dir, "registry-ca"), user: user, passwd: passwd}
	registryFiles(t, reg, h.Address, dir, registryRunDir)
	if out, err := set.SSH(ctx, h.Name, "install -d -m 0700 "+registryRunDir); err != nil {
		t.Fatalf("%s: %v\n%s", h.Name, err, out)
	}
	for _, f := range []string{"registry.crt", "registry.key", "registry.htpasswd", "registry.yml"} {
		if err := upload(ctx, set, h.Name, filepath.Join(dir, f), registryRunDir+"/"+f); err != nil {
			t.Fatal(err)
		}
	}
	if err := upload(ctx, set, h.Name, bin, registryRunDir+"/registry"); err != nil {
		t.Fatal(err)
	}
	if out, err := set.SSH(ctx, h.Name, "set -e; chmod 0755 "+registryRunDir+"/registry; systemd-run --unit=e2e-registry --property=Restart=on-failure "+
		registryRunDir+"/registry serve "+registryRunDir+"/registry.yml"); err != nil {
		t.Fatalf("%s: start the registry: %v\n%s", h.Name, err, out)
	}
	waitListening(t, reg.host, func() string {
		out, _ := set.SSH(ctx, h.Name, "journalctl -u e2e-registry --no-pager | tail -20")
		return out
	})
	return reg
}

// registryCerts makes a CA and a server certificate for ip, both PEM.
func registryCerts(t *testing.T, ip string) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubexm e2e registry CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: ip},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.ParseIP(ip)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// checkRegistryPull is issue 50's existing-registry path on the containerd
// machines: `kubexm artifact images push` fills a registry the test runs
// (its own CA, htpasswd), a second push sends nothing, a wrong password is
// refused by the push and by create-cluster's preflight before any host
// changes; create-cluster --tags containerd gives every node the CA
// (certsPath) and the credentials, a re-run changes nothing, and every node
// pulls the image through the CRI plugin with the digest the push printed.
// It returns the registry, still running, and the cluster.yaml naming it
// as privateRegistry.
func checkRegistryPull(ctx context.Context, t *testing.T, kx kubexm, set *testhosts.Set, root, cluster, image, create string) (testRegistry, string) {
	t.Helper()
	work := kx.dir
	reg := startRegistry(ctx, t, root, set.Gateway, work)
	pwFile := filepath.Join(work, "registry-password")
	inventory := filepath.Join(work, "cluster-registry.yaml")
	cluster = strings.TrimRight(cluster, "\n") + fmt.Sprintf(`
  registry:
    privateRegistry: %q
    auths:
      %q: {username: %s, passwordFile: %q, certsPath: %q}
`, reg.host, reg.host, reg.user, pwFile, reg.caDir)
	if err := os.WriteFile(inventory, []byte(cluster), 0o600); err != nil {
		t.Fatal(err)
	}
	setPassword := func(pw string) {
		if err := os.WriteFile(pwFile, []byte(pw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pushDir := filepath.Join(work, "push")
	placeImage(t, image, pushDir)
	push := func() (string, error) {
		cmd := exec.CommandContext(ctx, kx.bin, "artifact", "images", "push", "-f", inventory, "--workdir", pushDir)
		cmd.Dir = work
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	setPassword("not-the-password-9")
	if out, err := push(); err == nil || !strings.Contains(out, "registry "+reg.host) || !strings.Contains(out, "username or password is wrong") {
		t.Errorf("push with a wrong password: %v\n%s", err, out)
	}
	kxReg := kx
	kxReg.inventory = inventory
	res := kxReg.play(ctx, create, "--tags=preflight")
	if res.err == nil || !strings.Contains(res.failures(), "username or password is wrong") {
		t.Errorf("preflight with a wrong registry password: %v%s", res.err, res.failures())
	}
	if c := res.changed(); len(c) > 0 {
		t.Errorf("the refused preflight changed %d things", len(c))
	}

	setPassword(reg.passwd)
	start := time.Now()
	out, err := push()
	if err != nil {
		t.Fatalf("kubexm artifact images push: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`(?m)^pushed +` + regexp.QuoteMeta(reg.host) + `/e2e/busybox:latest@(sha256:[0-9a-f]{64}) \(amd64; ([0-9.]+) MiB sent\)$`).FindStringSubmatch(out)
	if m == nil || m[2] == "0.0" {
		t.Fatalf("the push did not print the image with its digest and the bytes sent:\n%s", out)
	}
	digest := m[1]
	t.Logf("PERF kubexm artifact images push (1 image, %s MiB) to the distribution registry %s: %s", m[2], registryVersion, time.Since(start).Round(time.Millisecond))
	if out, err := push(); err != nil || !strings.Contains(out, "1 images in "+reg.host+": 0.0 MiB sent") {
		t.Errorf("a second push: %v\n%s", err, out)
	}

	res = kxReg.play(ctx, create, "--tags=containerd")
	if res.err != nil {
		t.Fatalf("create-cluster --tags containerd with the registry: %v%s", res.err, res.failures())
	}
	res = kxReg.play(ctx, create, "--tags=containerd")
	if res.err != nil {
		t.Fatalf("re-run with the registry: %v%s", res.err, res.failures())
	}
	if c := res.changed(); len(c) > 0 {
		t.Errorf("re-run with the registry changed %d things, want 0:\n  %s", len(c), strings.Join(c, "\n  "))
	}
	ref := reg.host + "/e2e/busybox:latest"
	for _, h := range set.Hosts {
		out, err := set.SSH(ctx, h.Name, fmt.Sprintf(`set -e
stat -c '%%a %%n' /etc/containerd/certs.d/%[1]s/ca.crt
[ ! -e /etc/containerd/certs.d/%[1]s/hosts.toml ] || echo "hosts.toml for %[1]s"
crictl pull %[2]s >/dev/null
ctr -n k8s.io images ls name==%[2]s | awk 'NR > 1 {print $3}'`, reg.host, ref))
		if err != nil {
			t.Fatalf("%s: pull %s from the registry: %v\n%s", h.Name, ref, err, out)
		}
		want := fmt.Sprintf("600 /etc/containerd/certs.d/%s/ca.crt\n%s\n", reg.host, digest)
		if out != want {
			t.Errorf("%s: after the pull:\n%s\nwant\n%s", h.Name, out, want)
		}
	}
	return reg, inventory
}

// checkRegistryRole is issue 50's registry.type registry on the containerd
// machines: create-cluster --tags registry,containerd deploys the
// distribution registry on the first machine (TLS from the cluster CA,
// htpasswd from registry.auths), `kubexm artifact images push` fills it,
// every machine pulls from it through the CRI plugin, a re-run changes
// nothing, and delete --tags registry removes the service, binary and
// configuration and keeps the stored images: without them the host is as
// it was before. Before the delete it is made a proxy cache of upstream
// (checkRegistryProxy), the registry of upInventory.
func checkRegistryRole(ctx context.Context, t *testing.T, kx kubexm, set *testhosts.Set, cluster, image, server, create, del string, upstream testRegistry, upInventory string) {
	t.Helper()
	work := kx.dir
	first := set.Hosts[0]
	name := first.Address + ":5443"
	pwFile := filepath.Join(work, "registry-role-password")
	if err := os.WriteFile(pwFile, []byte("e2e-Role-Registry-7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cluster = strings.Replace(cluster, "  roleGroups:\n", "  roleGroups:\n    registry:\n    - "+first.Name+"\n", 1)
	cluster = strings.TrimRight(cluster, "\n") + fmt.Sprintf(`
  registry:
    type: registry
    privateRegistry: %q
    auths:
      %q: {username: pusher, passwordFile: %q}
`, name, name, pwFile)
	inventory := filepath.Join(work, "cluster-registry-role.yaml")
	if err := os.WriteFile(inventory, []byte(cluster), 0o600); err != nil {
		t.Fatal(err)
	}
	// What the registry host looks like before the role, except
	// containerd's certs.d, which the containerd role keeps.
	wide := []string{"/etc/systemd/system", "/usr/local/bin", "/etc/kubexm", "/var/lib/kubexm-registry"}
	before := snapshot(ctx, t, set, first.Name, wide...)
	kxReg := kx
	kxReg.inventory = inventory
	kxReg.extra = append(append([]string{}, kx.extra...),
		fmt.Sprintf(`{"registry_mirrors": ["%s/distribution/distribution/releases/download/v%s"]}`, server, registryVersion))
	tags := "--tags=registry,containerd"
	res := kxReg.play(ctx, create, tags)
	if res.err != nil {
		t.Fatalf("create-cluster %s with registry.type registry: %v%s", tags, res.err, res.failures())
	}
	t.Logf("PERF create-cluster %s (the registry on %s, containerd on 2 machines): %s (%d changed)", tags, first.Name, res.wall.Round(time.Millisecond), len(res.changed()))

	// The work directory of cluster e2e-containerd holds the cluster CA the
	// push trusts; its images/ the tarball.
	workDir := filepath.Join(work, ".kubexm", "e2e-containerd")
	placeImage(t, image, workDir)
	cmd := exec.CommandContext(ctx, kx.bin, "artifact", "images", "push", "-f", inventory, "--workdir", workDir)
	cmd.Dir = work
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "1 images in "+name+":") {
		t.Fatalf("push to the registry kubexm deployed: %v\n%s", err, out)
	}

	res = kxReg.play(ctx, create, tags)
	if res.err != nil {
		t.Fatalf("re-run with registry.type registry: %v%s", res.err, res.failures())
	}
	if c := res.changed(); len(c) > 0 {
		t.Errorf("re-run with registry.type registry changed %d things, want 0:\n  %s", len(c), strings.Join(c, "\n  "))
	}
	ref := name + "/e2e/busybox:latest"
	for _, h := range set.Hosts {
		if out, err := set.SSH(ctx, h.Name, "crictl pull "+ref); err != nil {
			t.Errorf("%s: pull %s from the registry kubexm deployed: %v\n%s", h.Name, ref, err, out)
		}
	}
	checkRegistryPasswordChange(ctx, t, kxReg, set, create, tags, pwFile, "e2e-Role-Registry-7", ref, func() (string, error) {
		cmd := exec.CommandContext(ctx, kx.bin, "artifact", "images", "push", "-f", inventory, "--workdir", workDir)
		cmd.Dir = work
		out, err := cmd.CombinedOutput()
		return string(out), err
	})

	checkRegistryCertRenewal(ctx, t, kxReg, set, workDir, filepath.Dir(create), ref)
	checkRegistryProxy(ctx, t, kxReg, set, create, cluster, name, upstream, upInventory)

	res = kxReg.play(ctx, del, "--tags=registry")
	if res.err != nil {
		t.Fatalf("delete --tags registry: %v%s", res.err, res.failures())
	}
	out2, err := set.SSH(ctx, first.Name, `for p in /etc/systemd/system/kubexm-registry.service /usr/local/bin/registry /etc/kubexm/registry; do [ ! -e "$p" ] || echo "left: $p"; done
[ -d /var/lib/kubexm-registry/docker ] || echo "the stored images are gone"
systemctl is-active kubexm-registry.service || true`)
	if err != nil || strings.TrimSpace(out2) != "inactive" {
		t.Errorf("%s after delete --tags registry: %v\n%s", first.Name, err, out2)
	}
	if _, err := set.SSH(ctx, first.Name, "rm -rf /var/lib/kubexm-registry"); err != nil {
		t.Error(err)
	}
	// With the kept images removed, the host is as it was.
	if d := diffSnapshots(before, snapshot(ctx, t, set, first.Name, wide...)); len(d) > 0 {
		t.Errorf("%s after delete --tags registry differs from before the create:\n  %s", first.Name, strings.Join(d, "\n  "))
	}
}

// checkRegistryPasswordChange changes the password of the registry kubexm
// deployed in cluster.yaml (its passwordFile) on a registry host that
// still has the unsalted htpasswd.sha256 an older kubexm kept:
// create-cluster --check --diff says htpasswd would change and changes
// nothing, showing neither password nor hash; the run rewrites htpasswd
// (bcrypt), removes htpasswd.sha256 and gives the nodes the new password; a
// re-run changes nothing; the push logs in with the new password and every
// node pulls again, while the old password is refused; no file on any host
// and nothing in kubexm's work directory (journals, logs) holds either
// password or the account's unsalted sha256.
func checkRegistryPasswordChange(ctx context.Context, t *testing.T, kx kubexm, set *testhosts.Set, create, tags, pwFile, oldPW, ref string, push func() (string, error)) {
	t.Helper()
	const user, newPW = "pusher", "e2e-Role-Registry-8"
	first := set.Hosts[0].Name
	name, _, _ := strings.Cut(ref, "/")
	unsalted := func(pw string) string {
		sum := sha256.Sum256([]byte(user + ":" + pw))
		return hex.EncodeToString(sum[:])
	}
	secrets := []string{oldPW, newPW, unsalted(oldPW), unsalted(newPW)}
	// An older kubexm's fingerprint of the account.
	if out, err := set.SSH(ctx, first, "printf '%s\\n' "+unsalted(oldPW)+" >/etc/kubexm/registry/htpasswd.sha256 && chmod 600 /etc/kubexm/registry/htpasswd.sha256"); err != nil {
		t.Fatalf("%s: plant htpasswd.sha256: %v\n%s", first, err, out)
	}
	hashOf := func() string {
		out, err := set.SSH(ctx, first, "cat /etc/kubexm/registry/htpasswd")
		if err != nil {
			t.Fatalf("%s: read htpasswd: %v", first, err)
		}
		return out
	}
	before := hashOf()
	if err := os.WriteFile(pwFile, []byte(newPW+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	cmd := kx.command(ctx, create, tags, "--check", "--diff")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("create-cluster %s --check --diff with a new registry password: %v\n%s", tags, err, tail(string(out), 30))
	}
	if !strings.Contains(string(out), "+pusher:(a new bcrypt hash)") {
		t.Errorf("--check --diff does not say htpasswd would change:\n%s", tail(string(out), 30))
	}
	_, hash, _ := strings.Cut(strings.TrimSpace(before), ":")
	for _, s := range append([]string{hash}, secrets...) {
		if strings.Contains(string(out), s) {
			t.Errorf("--check --diff shows a secret form (%.6s...)", s)
		}
	}
	if after := hashOf(); after != before {
		t.Errorf("--check rewrote htpasswd")
	}

	res := kx.play(ctx, create, tags)
	if res.err != nil {
		t.Fatalf("create-cluster %s with a new registry password: %v%s", tags, res.err, res.failures())
	}
	changed := strings.Join(res.changed(), "\n")
	for _, want := range []string{first + ": registry - htpasswd (bcrypt)", first + ": registry - no unsalted fingerprint of the account", "registry restarted"} {
		if !strings.Contains(changed, want) {
			t.Errorf("the run with a new password did not change %q; it changed:\n%s", want, changed)
		}
	}
	after := hashOf()
	_, newHash, _ := strings.Cut(strings.TrimSpace(after), ":")
	if bcrypt.CompareHashAndPassword([]byte(newHash), []byte(newPW)) != nil || !strings.HasPrefix(after, user+":") || strings.Count(after, "\n") != 1 {
		t.Errorf("htpasswd after the change is not one bcrypt entry of %s for the new password", user)
	}
	res = kx.play(ctx, create, tags)
	if res.err != nil {
		t.Fatalf("re-run after the password change: %v%s", res.err, res.failures())
	}
	if c := res.changed(); len(c) > 0 {
		t.Errorf("re-run after the password change changed %d things, want 0:\n  %s", len(c), strings.Join(c, "\n  "))
	}

	if out, err := push(); err != nil || !strings.Contains(out, "1 images in "+name+": 0.0 MiB sent") {
		t.Errorf("push with the new password: %v\n%s", err, out)
	}
	for _, h := range set.Hosts {
		out, err := set.SSH(ctx, h.Name, fmt.Sprintf(`crictl rmi %[1]s >/dev/null 2>&1
crictl pull %[1]s >/dev/null || echo "the pull with the new password failed"
crictl rmi %[1]s >/dev/null 2>&1
crictl pull --creds %[2]s %[1]s >/dev/null 2>&1 && echo "the old password still pulls"
crictl pull %[1]s >/dev/null || echo "the pull with the new password failed"
[ ! -e /etc/kubexm/registry/htpasswd.sha256 ] || echo "htpasswd.sha256 is still there"
grep -rlsF -e %[3]s -e %[4]s /etc /root /usr/local /opt /var/lib/kubexm /var/lib/kubexm-registry || true`,
			ref, shellQuote(user+":"+oldPW), unsalted(oldPW), unsalted(newPW)))
		if err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("%s after the password change: %v\n%s", h.Name, err, out)
		}
	}
	// kubexm's own records: journals, run logs, the work directory.
	_ = filepath.WalkDir(filepath.Join(kx.dir, ".kubexm"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		for _, s := range secrets {
			if strings.Contains(string(b), s) {
				t.Errorf("%s holds a secret form (%.6s...)", p, s)
			}
		}
		return nil
	})
}

// placeImage copies the busybox tarball into a work directory's layout,
// images/<name>/<tag>/<arch>/<file>, where kubexm artifact images push
// finds it.
func placeImage(t *testing.T, image, workDir string) {
	t.Helper()
	tarball := filepath.Join(workDir, "images", "busybox", "latest", "amd64", "busybox-latest-amd64.tar")
	if err := os.MkdirAll(filepath.Dir(tarball), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(image)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tarball, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkRegistryCertRenewal: certs-check reports the registry's certificate
// with the cluster's, as the host serves it; certs-renew --tags registry
// gives it a new one from the same CA (another serial, the same issuer),
// the registry serves it at once, every node still pulls through it, and
// create-cluster then changes nothing.
func checkRegistryCertRenewal(ctx context.Context, t *testing.T, kx kubexm, set *testhosts.Set, workDir, playbooks, ref string) {
	t.Helper()
	first := set.Hosts[0].Name
	const crt = "/etc/kubexm/registry/registry.crt"
	served := func() *x509.Certificate {
		out, err := set.SSH(ctx, first, "cat "+crt)
		if err != nil {
			t.Fatalf("%s: read %s: %v", first, crt, err)
		}
		b, _ := pem.Decode([]byte(out))
		if b == nil {
			t.Fatalf("%s: %s holds no PEM block:\n%s", first, crt, out)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatalf("%s: %s: %v", first, crt, err)
		}
		return c
	}
	before := served()

	res := kx.play(ctx, filepath.Join(playbooks, "certs-check"))
	if res.err != nil {
		t.Fatalf("certs-check with registry.type registry: %v%s", res.err, res.failures())
	}
	data, err := os.ReadFile(filepath.Join(workDir, "certs-check.json"))
	if err != nil {
		t.Fatal(err)
	}
	var report struct {
		Certificates []struct {
			Host, Path, Status, Serial string
		} `json:"certificates"`
	}
	if err := json.Unmarshal(data, &report); err != nil {
		t.Fatalf("certs-check.json: %v\n%s", err, data)
	}
	row := "no row"
	for _, c := range report.Certificates {
		if c.Host == first && c.Path == crt {
			row = c.Status + " " + c.Serial
		}
	}
	if want := "ok " + strings.ToUpper(before.SerialNumber.Text(16)); row != want {
		t.Errorf("certs-check's row for %s %s: %q, want %q (status, serial)", first, crt, row, want)
	}

	res = kx.play(ctx, filepath.Join(playbooks, "certs-renew"), "--tags=registry")
	if res.err != nil {
		t.Fatalf("certs-renew --tags registry: %v%s", res.err, res.failures())
	}
	t.Logf("PERF certs-renew --tags registry: %s (%d changed)", res.wall.Round(time.Millisecond), len(res.changed()))
	after := served()
	if after.SerialNumber.Cmp(before.SerialNumber) == 0 {
		t.Errorf("certs-renew left the registry's certificate as it was (serial %s)", before.SerialNumber.Text(16))
	}
	if after.Issuer.String() != before.Issuer.String() || !bytes.Equal(after.AuthorityKeyId, before.AuthorityKeyId) {
		t.Errorf("the renewed certificate's issuer %q (key %x), was %q (key %x): the CA must stay", after.Issuer, after.AuthorityKeyId, before.Issuer, before.AuthorityKeyId)
	}
	// What the registry serves on its port now is the new certificate
	// (crictl pull below checks that the nodes trust it).
	name, _, _ := strings.Cut(ref, "/")
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", name, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("TLS to %s: %v", name, err)
	}
	got := conn.ConnectionState().PeerCertificates[0]
	conn.Close()
	if got.SerialNumber.Cmp(after.SerialNumber) != 0 {
		t.Errorf("%s serves serial %s, want the renewed %s", name, got.SerialNumber.Text(16), after.SerialNumber.Text(16))
	}
	for _, h := range set.Hosts {
		if out, err := set.SSH(ctx, h.Name, "crictl pull "+ref); err != nil {
			t.Errorf("%s: pull %s after the registry's certificate was renewed: %v\n%s", h.Name, ref, err, out)
		}
	}
	res = kx.play(ctx, filepath.Join(playbooks, "create-cluster"), "--tags=registry,containerd")
	if res.err != nil {
		t.Fatalf("create-cluster after certs-renew: %v%s", res.err, res.failures())
	}
	if c := res.changed(); len(c) > 0 {
		t.Errorf("create-cluster after certs-renew changed %d things, want 0:\n  %s", len(c), strings.Join(c, "\n  "))
	}
}

// checkRegistryProxy makes the registry kubexm deployed on the first
// machine (roleCluster, kx; privateRegistry name) a proxy cache of
// upstream, a registry the test runs with a CA of its own and an account,
// whose privateRegistry cluster.yaml is upInventory: an image pushed to the upstream alone; create-cluster --tags
// registry with registry_proxy_remote_url and the upstream's account in
// registry.auths with its certsPath makes it a proxy cache and gives it that
// CA (upstream-ca, named by SSL_CERT_DIR in its unit); a re-run changes
// nothing; the first machine pulls the image through it with the
// upstream's digest, and the registry keeps it; with the upstream stopped
// the other machine, which never had the image, pulls it from the cache
// and the first machine pulls it again, but the registry, restarted, does
// not start (distribution asks the upstream when it starts). Switched back
// to a registry of its own (which starts it again), the CA and
// SSL_CERT_DIR are gone and its own images still pull.
func checkRegistryProxy(ctx context.Context, t *testing.T, kx kubexm, set *testhosts.Set, create, roleCluster, name string, upstream testRegistry, upInventory string) {
	t.Helper()
	start := time.Now()
	work := kx.dir
	first, second := set.Hosts[0].Name, set.Hosts[1].Name

	// An image of its own in the upstream alone: one file whose content no
	// machine has seen.
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	body := []byte(fmt.Sprintf("pulled through kubexm's proxy cache %d\n", time.Now().UnixNano()))
	if err := tw.WriteHeader(&tar.Header{Name: "proxied", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	pushDir := filepath.Join(work, "push-proxied")
	tarball := filepath.Join(pushDir, "images", "proxied", "latest", "amd64", "proxied-latest-amd64.tar")
	if err := os.MkdirAll(filepath.Dir(tarball), 0o755); err != nil {
		t.Fatal(err)
	}
	dockerArchive(t, tarball, "docker.io/e2e/proxied:latest", layer.Bytes())
	cmd := exec.CommandContext(ctx, kx.bin, "artifact", "images", "push", "-f", upInventory, "--workdir", pushDir)
	cmd.Dir = work
	out, err := cmd.CombinedOutput()
	m := regexp.MustCompile(`(?m)^pushed +` + regexp.QuoteMeta(upstream.host) + `/e2e/proxied:latest@(sha256:[0-9a-f]{64}) `).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("push e2e/proxied to the upstream %s: %v\n%s", upstream.host, err, out)
	}
	digest := string(m[1])

	upPW := filepath.Join(work, "registry-upstream-password")
	if err := os.WriteFile(upPW, []byte(upstream.passwd+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	inventory := filepath.Join(work, "cluster-registry-proxy.yaml")
	// roleCluster's last line is privateRegistry's auths entry.
	proxyCluster := strings.TrimRight(roleCluster, "\n") + fmt.Sprintf("\n      %q: {username: %s, passwordFile: %q, certsPath: %q}\n",
		upstream.host, upstream.user, upPW, upstream.caDir)
	if err := os.WriteFile(inventory, []byte(proxyCluster), 0o600); err != nil {
		t.Fatal(err)
	}
	kxProxy := kx
	kxProxy.inventory = inventory
	kxProxy.extra = append(append([]string{}, kx.extra...), fmt.Sprintf(`{"registry_proxy_remote_url": "https://%s"}`, upstream.host))
	res := kxProxy.play(ctx, create, "--tags=registry")
	if res.err != nil {
		t.Fatalf("create-cluster --tags registry in proxy-cache mode: %v%s", res.err, res.failures())
	}
	t.Logf("PERF create-cluster --tags registry, the registry made a proxy cache of %s: %s (%d changed)", upstream.host, res.wall.Round(time.Millisecond), len(res.changed()))
	changed := strings.Join(res.changed(), "\n")
	for _, want := range []string{"registry - configuration", "registry - the proxy upstream's CA (certsPath)", "registry - systemd unit", "registry restarted"} {
		if !strings.Contains(changed, want) {
			t.Errorf("the switch to proxy mode did not change %q; it changed:\n%s", want, changed)
		}
	}
	const caDir = "/etc/kubexm/registry/upstream-ca"
	ca, err := os.ReadFile(filepath.Join(upstream.caDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	out2, err := set.SSH(ctx, first, fmt.Sprintf(`set -e
stat -c '%%a %%n' %[1]s %[1]s/ca.crt
sha256sum <%[1]s/ca.crt | cut -d' ' -f1
systemctl show -p Environment --value kubexm-registry.service
grep -cF 'remoteurl: "https://%[2]s"' /etc/kubexm/registry/config.yml`, caDir, upstream.host))
	caSum := sha256.Sum256(ca)
	want := fmt.Sprintf("700 %[1]s\n600 %[1]s/ca.crt\n%[2]x\nOTEL_TRACES_EXPORTER=none SSL_CERT_DIR=%[1]s:/etc/ssl/certs:/etc/pki/tls/certs\n1\n", caDir, caSum)
	if err != nil || out2 != want {
		t.Errorf("%s in proxy mode: %v\n%s\nwant\n%s", first, err, out2, want)
	}
	res = kxProxy.play(ctx, create, "--tags=registry")
	if res.err != nil {
		t.Fatalf("re-run in proxy-cache mode: %v%s", res.err, res.failures())
	}
	if c := res.changed(); len(c) > 0 {
		t.Errorf("re-run in proxy-cache mode changed %d things, want 0:\n  %s", len(c), strings.Join(c, "\n  "))
	}

	ref := name + "/e2e/proxied:latest"
	pull := func(host, when string) {
		t.Helper()
		out, err := set.SSH(ctx, host, fmt.Sprintf(`set -e
crictl pull %[1]s >/dev/null
ctr -n k8s.io images ls name==%[1]s | awk 'NR > 1 {print $3}'`, ref))
		if err != nil || strings.TrimSpace(out) != digest {
			t.Errorf("%s: pull %s through the proxy cache %s: %v\n%s\nwant the upstream's digest %s", host, ref, when, err, out, digest)
		}
	}
	pull(first, "")
	// What it fetched, it keeps: the manifest under the repository.
	if out, err := set.SSH(ctx, first, "ls /var/lib/kubexm-registry/docker/registry/v2/repositories/e2e/proxied/_manifests/revisions/sha256/"); err != nil ||
		strings.TrimSpace(out) != strings.TrimPrefix(digest, "sha256:") {
		t.Errorf("%s: the proxy cache's manifests of e2e/proxied: %v %q, want %s", first, err, out, digest)
	}

	upstream.stop()
	if c, err := net.DialTimeout("tcp", upstream.host, time.Second); err == nil {
		c.Close()
		t.Fatalf("the upstream %s still answers after it was stopped", upstream.host)
	}
	pull(second, "with the upstream stopped")
	if out, err := set.SSH(ctx, first, "crictl rmi "+ref); err != nil {
		t.Errorf("%s: crictl rmi %s: %v\n%s", first, ref, err, out)
	}
	pull(first, "again with the upstream stopped")
	// distribution asks the upstream for its auth URLs when it starts and
	// panics when it cannot: a proxy cache does not (re)start while its
	// upstream is down (or untrusted); systemd retries it every 5 s.
	_, port, _ := net.SplitHostPort(name)
	out2, err = set.SSH(ctx, first, fmt.Sprintf(`t=$(date +%%s); systemctl restart kubexm-registry; sleep 2
echo "panics: $(journalctl -u kubexm-registry --since "@$t" -o cat | grep -cF 'panic: Get "https://%s/v2/"')"
if (exec 3<>/dev/tcp/127.0.0.1/%s) 2>/dev/null; then echo "the registry listens"; fi`, upstream.host, port))
	if err != nil || !strings.HasPrefix(out2, "panics: ") || strings.HasPrefix(out2, "panics: 0\n") || strings.Contains(out2, "listens") {
		t.Errorf("%s: the proxy cache restarted with its upstream down: %v\n%s", first, err, out2)
	}

	// Back to a registry of its own.
	res = kx.play(ctx, create, "--tags=registry")
	if res.err != nil {
		t.Fatalf("create-cluster --tags registry out of proxy-cache mode: %v%s", res.err, res.failures())
	}
	if changed := strings.Join(res.changed(), "\n"); !strings.Contains(changed, "registry - no upstream CA without one") {
		t.Errorf("the switch back did not remove the upstream's CA; it changed:\n%s", changed)
	}
	out2, err = set.SSH(ctx, first, fmt.Sprintf(`[ ! -e %s ] || echo "the upstream's CA is still there"
systemctl show -p Environment --value kubexm-registry.service
grep -c '^proxy:' /etc/kubexm/registry/config.yml || true
crictl pull %s >/dev/null || echo "its own image does not pull"`, caDir, name+"/e2e/busybox:latest"))
	if err != nil || out2 != "OTEL_TRACES_EXPORTER=none\n0\n" {
		t.Errorf("%s after the switch back: %v\n%s", first, err, out2)
	}
	t.Logf("PERF the registry's proxy-cache step (push to the upstream, switch, re-run, 3 pulls, a restart, switch back): %s", time.Since(start).Round(time.Millisecond))
}
