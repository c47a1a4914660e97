package imagepush

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// testRegistry is an in-process registry behind TLS and basic auth; certs
// is a certs.d directory with its CA.
func testRegistry(t *testing.T) (host, certs string) {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "pusher" || p != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	certs = t.TempDir()
	writePEM(t, filepath.Join(certs, "ca.crt"), srv.Certificate().Raw)
	return strings.TrimPrefix(srv.URL, "https://"), certs
}

func writePEM(t *testing.T, p string, der []byte) {
	t.Helper()
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
}

// otherCA is a certs.d directory with a CA that signed nothing the
// registry serves.
func otherCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writePEM(t, filepath.Join(dir, "ca.crt"), der)
	return dir
}

// tarballOf writes img as a docker-archive tagged ref.
func tarballOf(t *testing.T, dir, ref, arch string, img v1.Image) Image {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, strings.NewReplacer("/", "_", ":", "_").Replace(ref)+"-"+arch+".tar")
	if err := tarball.WriteToFile(p, tag, img); err != nil {
		t.Fatal(err)
	}
	return Image{Ref: ref, Arch: arch, File: p}
}

func randomImage(t *testing.T, arch string) v1.Image {
	t.Helper()
	img, err := random.Image(64<<10, 2)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return img
}

// localDigest is the digest the tarball's image has.
func localDigest(t *testing.T, im Image) v1.Hash {
	t.Helper()
	tag, _ := name.NewTag(im.Ref)
	img, err := tarball.ImageFromPath(im.File, &tag)
	if err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestPush(t *testing.T) {
	ctx := context.Background()
	host, certs := testRegistry(t)
	dir := t.TempDir()
	images := []Image{
		tarballOf(t, dir, "registry.k8s.io/pause:3.10", "amd64", randomImage(t, "amd64")),
		tarballOf(t, dir, "registry.k8s.io/pause:3.10", "arm64", randomImage(t, "arm64")),
		tarballOf(t, dir, "docker.io/calico/node:v3.30.0", "amd64", randomImage(t, "amd64")),
	}
	tgt := Target{Registry: host + "/kubexm", Auth: Auth{Username: "pusher", Password: "s3cret", CertsDir: certs}}
	if err := Check(ctx, tgt); err != nil {
		t.Fatalf("check: %v", err)
	}
	dry, err := Push(ctx, tgt, images, Options{DryRun: true})
	if err != nil || len(dry.Images) != 2 || !dry.Images[0].Pending || !dry.Images[1].Pending || dry.Sent != 0 {
		t.Fatalf("dry run on an empty registry: %+v, %v; want both pending, nothing sent", dry, err)
	}
	var events, done int
	res, err := Push(ctx, tgt, images, Options{Jobs: 2, Progress: func(ev Event) {
		events++
		if ev.Done {
			done++
		}
	}})
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	if len(res.Images) != 2 || done != 2 || events <= done {
		t.Fatalf("pushed %+v with %d events, %d done; want 2 images, progress on the way", res.Images, events, done)
	}
	if res.Sent < 3*128<<10 || res.Skipped != 0 {
		t.Errorf("first push sent %d bytes, skipped %d; want every layer sent, none skipped", res.Sent, res.Skipped)
	}
	opts := []remote.Option{remote.WithAuth(&authn.Basic{Username: "pusher", Password: "s3cret"})}
	base, err := tgt.Auth.transport()
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts, remote.WithTransport(base))

	// The single-arch image keeps the tarball's digest.
	calico := host + "/kubexm/calico/node:v3.30.0"
	d, err := remote.Head(mustRef(t, calico), opts...)
	if err != nil {
		t.Fatal(err)
	}
	if want := localDigest(t, images[2]); d.Digest != want {
		t.Errorf("%s has digest %s in the registry, the tarball %s", calico, d.Digest, want)
	}
	// Two architectures become one index whose manifests are the tarballs'.
	pause := host + "/kubexm/pause:3.10"
	desc, err := remote.Get(mustRef(t, pause), opts...)
	if err != nil {
		t.Fatal(err)
	}
	if !desc.MediaType.IsIndex() {
		t.Fatalf("%s is a %s, want an index", pause, desc.MediaType)
	}
	idx, err := desc.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]v1.Hash{}
	for _, m := range im.Manifests {
		got[m.Platform.Architecture] = m.Digest
	}
	for _, i := range images[:2] {
		if want := localDigest(t, i); got[i.Arch] != want {
			t.Errorf("%s %s: digest %s in the index, the tarball %s", pause, i.Arch, got[i.Arch], want)
		}
	}
	for _, p := range res.Images {
		if p.Target == pause && (len(p.Archs) != 2 || p.Digest != desc.Digest.String()) {
			t.Errorf("result for %s: %+v, want both archs and digest %s", pause, p, desc.Digest)
		}
	}

	// The registry serves every image; one it lacks is named.
	missing, err := Missing(ctx, tgt, []string{pause, calico, host + "/kubexm/coredns:v1"})
	if err != nil || len(missing) != 1 || missing[0] != host+"/kubexm/coredns:v1" {
		t.Errorf("Missing = %v, %v; want the coredns image only", missing, err)
	}
	// A dry run against a full registry has nothing pending.
	dry, err = Push(ctx, tgt, images, Options{DryRun: true})
	if err != nil || len(dry.Images) != 2 || dry.Images[0].Pending || dry.Images[1].Pending {
		t.Errorf("dry run after the push: %+v, %v; want nothing pending", dry, err)
	}

	// Again: the registry has everything and nothing is sent.
	again, err := Push(ctx, tgt, images, Options{})
	if err != nil {
		t.Fatalf("second push: %v", err)
	}
	if again.Sent != 0 || again.Skipped != res.Sent || len(again.Images) != 2 {
		t.Errorf("second push sent %d, skipped %d (first sent %d), images %d; want 0 sent, all skipped", again.Sent, again.Skipped, res.Sent, len(again.Images))
	}

	// A new tag of an image the registry has: its blobs are not sent again.
	retag := tarballOf(t, dir, "docker.io/calico/node:v3.30.1", "amd64", mustImage(t, images[2]))
	third, err := Push(ctx, tgt, []Image{retag}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if third.Sent != 0 || third.Skipped == 0 {
		t.Errorf("a new tag of pushed blobs sent %d bytes, skipped %d; want 0 sent", third.Sent, third.Skipped)
	}
}

func mustImage(t *testing.T, im Image) v1.Image {
	t.Helper()
	tag, _ := name.NewTag(im.Ref)
	img, err := tarball.ImageFromPath(im.File, &tag)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestPushRefused(t *testing.T) {
	ctx := context.Background()
	host, certs := testRegistry(t)
	dir := t.TempDir()
	images := []Image{tarballOf(t, dir, "registry.k8s.io/pause:3.10", "amd64", randomImage(t, "amd64"))}
	plain := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(plain.Close)
	plainHost := strings.TrimPrefix(plain.URL, "http://")
	for _, c := range []struct {
		name string
		tgt  Target
		want []string
	}{
		{"wrong password", Target{Registry: host, Auth: Auth{Username: "pusher", Password: "wrong", CertsDir: certs}},
			[]string{"registry " + host, "401", "username or password is wrong", `registry.auths["` + host + `"]`}},
		{"wrong CA", Target{Registry: host, Auth: Auth{Username: "pusher", Password: "s3cret", CertsDir: otherCA(t)}},
			[]string{"registry " + host, "x509", "not signed by a CA", "certsPath"}},
		{"unreachable", Target{Registry: "127.0.0.1:1", Auth: Auth{Username: "pusher", Password: "s3cret"}},
			[]string{"registry 127.0.0.1:1", "unreachable"}},
		{"plain HTTP not asked for", Target{Registry: plainHost},
			[]string{"registry " + plainHost, "plainHTTP: true"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Check(ctx, c.tgt)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("check: %v, want an *Error", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("check: %v\nwant %q in it", err, w)
				}
			}
			res, err := Push(ctx, c.tgt, images, Options{})
			if err == nil || !strings.Contains(err.Error(), "image "+c.tgt.Registry+"/pause:3.10") || !strings.Contains(err.Error(), c.want[len(c.want)-1]) {
				t.Errorf("push: %v, want the image and %q named", err, c.want[len(c.want)-1])
			}
			if res != nil && len(res.Images) != 0 {
				t.Errorf("a failed push reports %v as pushed", res.Images)
			}
		})
	}
	// With plainHTTP the same registry takes the image.
	if _, err := Push(ctx, Target{Registry: plainHost, Auth: Auth{PlainHTTP: true}}, images, Options{}); err != nil {
		t.Errorf("push over plain HTTP with plainHTTP: %v", err)
	}
}

func TestTargetRef(t *testing.T) {
	for _, c := range []struct {
		reg, ns, ref, want string
	}{
		{"reg.local:5000", "", "registry.k8s.io/pause:3.10", "reg.local:5000/pause:3.10"},
		{"reg.local", "", "registry.k8s.io/coredns/coredns:v1.12.0", "reg.local/coredns/coredns:v1.12.0"},
		{"reg.local", "", "docker.io/calico/node:v3.30.0", "reg.local/calico/node:v3.30.0"},
		{"reg.local", "kubexm", "docker.io/calico/node:v3.30.0", "reg.local/kubexm/node:v3.30.0"},
		{"harbor.local/proj", "", "ghcr.io/flannel-io/flannel:v0.26.7", "harbor.local/proj/flannel-io/flannel:v0.26.7"},
		// A bundle exported with privateRegistry set already names it.
		{"harbor.local/proj", "", "harbor.local/proj/flannel-io/flannel:v0.26.7", "harbor.local/proj/flannel-io/flannel:v0.26.7"},
		{"reg.local", "kubexm", "reg.local/kubexm/node:v3.30.0", "reg.local/kubexm/node:v3.30.0"},
	} {
		got, err := TargetRef(Target{Registry: c.reg, Namespace: c.ns}, c.ref)
		if err != nil || got != c.want {
			t.Errorf("TargetRef(%s, %s, %s) = %q, %v; want %q", c.reg, c.ns, c.ref, got, err, c.want)
		}
	}
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
