package cli

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

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/mensylisir/kubexm/lifecycle"
)

// kubexm artifact images push sends the work directory's image tarballs
// to privateRegistry with cluster.yaml's credentials; a second push sends
// nothing, a wrong password is refused before anything is sent.
func TestArtifactImagesPush(t *testing.T) {
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "admin" || p != "Pw-4" {
			w.Header().Set("WWW-Authenticate", `Basic realm="t"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "https://")

	dir := t.TempDir()
	if _, _, err := run(t, newCreateConfigCmd(), "-o", filepath.Join(dir, "cluster.yaml")); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cluster := strings.Replace(string(data), "  registry:\n", "  registry:\n    type: external\n    privateRegistry: "+host+"\n    namespaceOverride: kubexm\n    auths:\n      \""+host+"\": {username: admin, password: \"${KUBEXM_TEST_REG_PW}\", skipTLSVerify: true}\n", 1)
	file := writeFile(t, "cluster.yaml", cluster)
	work := filepath.Join(dir, "work")
	img, err := random.Image(32<<10, 1)
	if err != nil {
		t.Fatal(err)
	}
	tar := filepath.Join(work, "images", "pause", "3.10", "amd64", "pause-3.10-amd64.tar")
	if err := os.MkdirAll(filepath.Dir(tar), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(tar, name.MustParseReference("registry.k8s.io/pause:3.10").(name.Tag), img); err != nil {
		t.Fatal(err)
	}

	t.Setenv("KUBEXM_TEST_REG_PW", "Pw-4")
	var out strings.Builder
	f := lifecycle.PushRequest{Inventory: file, WorkDir: work, Jobs: 2}
	if err := lifecycle.PushImages(context.Background(), &out, f); err != nil {
		t.Fatalf("push: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "pushed  "+host+"/kubexm/pause:3.10@sha256:") || !strings.Contains(out.String(), "1 images in "+host+": ") {
		t.Errorf("push printed:\n%s", out.String())
	}
	out.Reset()
	if err := lifecycle.PushImages(context.Background(), &out, f); err != nil || !strings.Contains(out.String(), ": 0.0 MiB sent") || !strings.Contains(out.String(), "present "+host+"/kubexm/pause:3.10") {
		t.Errorf("second push: %v\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "Pw-4") {
		t.Errorf("the password is printed:\n%s", out.String())
	}

	t.Setenv("KUBEXM_TEST_REG_PW", "wrong")
	out.Reset()
	err = lifecycle.PushImages(context.Background(), &out, f)
	if err == nil || !strings.Contains(err.Error(), "registry "+host) || !strings.Contains(err.Error(), "username or password is wrong") || out.Len() != 0 {
		t.Errorf("wrong password: %v\n%s", err, out.String())
	}
	if err != nil && strings.Contains(err.Error(), "wrong\"") {
		t.Errorf("the password is in the error: %v", err)
	}
}
