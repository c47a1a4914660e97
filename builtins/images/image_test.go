package images

import (
	"context"
	"io"
	"log"
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
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/engine/step"
)

func testImageSave() imageSaveBuiltin { return imageSaveBuiltin{backoff: time.Millisecond} }

// platformImage is a random image whose config says os/arch.
func platformImage(t *testing.T, arch string) v1.Image {
	t.Helper()
	img, err := random.Image(2048, 2)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func push(t *testing.T, ref string, img v1.Image, opts ...remote.Option) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, opts...); err != nil {
		t.Fatal(err)
	}
}

// registryHost serves go-containerregistry's in-memory registry on
// 127.0.0.1 (plain HTTP, as loopback registries are reached).
func registryHost(t *testing.T, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	var h http.Handler = registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestImageSave(t *testing.T) {
	host := registryHost(t, nil)
	img := platformImage(t, "amd64")
	push(t, host+"/library/pause:3.10", img)
	env, _ := steptest.Env(t)
	args := step.Args{
		"ref":  host + "/library/pause:3.10",
		"tag":  "registry.k8s.io/pause:3.10",
		"dest": "images/pause/3.10/amd64/pause-3.10-amd64.tar",
	}
	res := steptest.Converge(t, testImageSave(), env, args, env.WorkDir)
	dest := filepath.Join(env.WorkDir, "images/pause/3.10/amd64/pause-3.10-amd64.tar")
	if res.Data["dest"] != dest {
		t.Fatalf("dest %v", res.Data["dest"])
	}
	// The tarball holds the image under the tag given, as ctr imports it.
	tag, _ := name.NewTag("registry.k8s.io/pause:3.10")
	saved, err := tarball.ImageFromPath(dest, &tag)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.ConfigName()
	got, _ := saved.ConfigName()
	if got != want || res.Data["image_id"] != want.String() {
		t.Fatalf("saved image %s, want %s (%v)", got, want, res.Data["image_id"])
	}
	wantLayers, _ := img.Layers()
	gotLayers, _ := saved.Layers()
	if len(gotLayers) != len(wantLayers) {
		t.Fatalf("%d layers, want %d", len(gotLayers), len(wantLayers))
	}
	sum, err := sha256File(dest)
	if err != nil || res.Data["sha256"] != sum {
		t.Fatalf("sha256 %v, file %s %v", res.Data["sha256"], sum, err)
	}
	if _, err := os.Stat(dest + ".part"); !os.IsNotExist(err) {
		t.Errorf("a .part file is left: %v", err)
	}

	// A new image under the same tag is saved again.
	push(t, host+"/library/pause:3.10", platformImage(t, "amd64"))
	if res := steptest.Run(t, testImageSave(), env, args); !res.Changed {
		t.Fatalf("new image: want changed, got %+v", res)
	}
	if res := steptest.Run(t, testImageSave(), env, args); res.Changed {
		t.Fatalf("second run after the new image: want unchanged, got %+v", res)
	}
}

func TestImageSavePlatformAndErrors(t *testing.T) {
	host := registryHost(t, nil)
	amd, arm := platformImage(t, "amd64"), platformImage(t, "arm64")
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
	)
	r, _ := name.ParseReference(host + "/coredns/coredns:v1.12.0")
	if err := remote.WriteIndex(r, idx); err != nil {
		t.Fatal(err)
	}
	env, _ := steptest.Env(t)
	res := steptest.Run(t, testImageSave(), env, step.Args{"ref": host + "/coredns/coredns:v1.12.0", "dest": "c.tar", "platform": "linux/arm64"})
	if want, _ := arm.ConfigName(); res.Data["image_id"] != want.String() {
		t.Fatalf("picked %v, want the arm64 image %s", res.Data["image_id"], want)
	}

	// A single-platform image of another architecture is refused.
	push(t, host+"/only/amd:1", amd)
	_, err := steptest.RunBuiltin(context.Background(), env, testImageSave(), step.Args{"ref": host + "/only/amd:1", "dest": "x.tar", "platform": "linux/arm64", "retries": 1})
	if err == nil || !strings.Contains(err.Error(), "linux/amd64 image, not linux/arm64") {
		t.Fatalf("wrong platform: %v", err)
	}
	// An unknown image fails without retrying forever, naming the ref.
	_, err = steptest.RunBuiltin(context.Background(), env, testImageSave(), step.Args{"ref": host + "/no/such:1", "dest": "y.tar", "retries": 2})
	if err == nil || !strings.Contains(err.Error(), host+"/no/such:1") {
		t.Fatalf("unknown image: %v", err)
	}
	// A digest reference needs a tag for the tarball.
	d, _ := amd.Digest()
	_, err = steptest.RunBuiltin(context.Background(), env, testImageSave(), step.Args{"ref": host + "/only/amd@" + d.String(), "dest": "z.tar"})
	if err == nil || !strings.Contains(err.Error(), "give tag") {
		t.Fatalf("digest without tag: %v", err)
	}
	for _, p := range []string{"x.tar", "y.tar", "z.tar"} {
		if _, err := os.Stat(filepath.Join(env.WorkDir, p)); !os.IsNotExist(err) {
			t.Errorf("%s written after a failure", p)
		}
	}
}

// Credentials come from an auths entry (spec.registry.auths) for the
// registry's host; without them the registry refuses.
func TestImageSaveAuth(t *testing.T) {
	host := registryHost(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != "admin" || p != "s3cret" {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	img := platformImage(t, "amd64")
	r, _ := name.ParseReference(host + "/private/app:1")
	if err := remote.Write(r, img, remote.WithAuth(&authn.Basic{Username: "admin", Password: "s3cret"})); err != nil {
		t.Fatal(err)
	}
	env, _ := steptest.Env(t)
	_, err := steptest.RunBuiltin(context.Background(), env, testImageSave(), step.Args{"ref": host + "/private/app:1", "dest": "a.tar", "retries": 1})
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
		t.Fatalf("without credentials: %v", err)
	}
	auths := map[string]any{host: map[string]any{"username": "admin", "password": "s3cret", "plainHTTP": true}}
	res := steptest.Run(t, testImageSave(), env, step.Args{"ref": host + "/private/app:1", "dest": "a.tar", "auths": auths})
	if !res.Changed {
		t.Fatalf("with credentials: %+v", res)
	}
}

// A registry with a certificate nobody signed is reached with insecure (or
// skipTLSVerify in its auths entry), and refused without.
func TestImageSaveInsecureTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes below
	srv.StartTLS()
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "https://")
	push(t, host+"/tls/app:1", platformImage(t, "amd64"), remote.WithTransport(srv.Client().Transport))
	env, _ := steptest.Env(t)
	if _, err := steptest.RunBuiltin(context.Background(), env, testImageSave(), step.Args{"ref": host + "/tls/app:1", "dest": "a.tar", "retries": 1}); err == nil {
		t.Fatal("an unverifiable certificate was accepted")
	}
	if res := steptest.Run(t, testImageSave(), env, step.Args{"ref": host + "/tls/app:1", "dest": "a.tar", "insecure": true}); !res.Changed {
		t.Fatalf("insecure: %+v", res)
	}
	auths := map[string]any{host: map[string]any{"skipTLSVerify": true}}
	if res := steptest.Run(t, testImageSave(), env, step.Args{"ref": host + "/tls/app:1", "dest": "b.tar", "auths": auths}); !res.Changed {
		t.Fatalf("skipTLSVerify: %+v", res)
	}
}

func sha256File(p string) (string, error) {
	d := map[string]any{}
	err := fileFacts(p, d)
	s, _ := d["sha256"].(string)
	return s, err
}
