package images

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/internal/testbin"
)

// The image holds the binary at /usr/local/bin/kubexm and runs `kubexm
// controller`; its tag names the binary; --check writes nothing, a second
// run changes nothing.
func TestControllerImage(t *testing.T) {
	exe := testbin.Static(t)
	bin, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(bin)
	b := controllerImageBuiltin{exe: func() (string, error) { return exe, nil }}
	env, _ := steptest.Env(t)
	args := b.Spec().WithDefaults(step.Args{"repo": "kubexm.local/kubexm-controller", "version": "0.1.0+dirty", "arch": runtime.GOARCH})
	res := steptest.Converge(t, b, env, args, env.WorkDir)
	tagName := "0.1.0-dirty-" + hex.EncodeToString(sum[:])[:12]
	ref := "kubexm.local/kubexm-controller:" + tagName
	src := filepath.Join("images/kubexm-controller", tagName, runtime.GOARCH, "kubexm-controller-"+tagName+"-"+runtime.GOARCH+".tar")
	if res.Data["ref"] != ref || res.Data["src"] != src || res.Data["sha256"] == nil {
		t.Fatalf("result %+v, want ref %s, src %s", res.Data, ref, src)
	}
	tag, _ := name.NewTag(ref)
	img, err := tarball.ImageFromPath(filepath.Join(env.WorkDir, src), &tag)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Config.Entrypoint, " ") != "/usr/local/bin/kubexm controller" || cfg.Architecture != runtime.GOARCH || cfg.OS != "linux" {
		t.Errorf("config %+v", cfg)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seen[h.Name] = true
		if h.Uid != 0 || h.Gid != 0 || h.ModTime.Unix() != 0 {
			t.Errorf("%s: owner %d:%d, mtime %v", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		if h.Name == "usr/local/bin/kubexm" {
			got, _ := io.ReadAll(tr)
			if !bytes.Equal(got, bin) || h.Mode != 0o755 {
				t.Errorf("the binary in the image differs (mode %o)", h.Mode)
			}
		}
	}
	if !seen["usr/local/bin/kubexm"] || !seen["tmp/"] {
		t.Errorf("the layer holds %v", seen)
	}

	// The same binary in another work directory: the same bytes.
	env2, _ := steptest.Env(t)
	res2 := steptest.Run(t, b, env2, args)
	if res2.Data["sha256"] != res.Data["sha256"] {
		t.Errorf("two builds of one binary differ: %v and %v", res.Data["sha256"], res2.Data["sha256"])
	}
}

// Refused: another architecture than the binary's, and a binary that needs
// a dynamic loader (the image has no C library).
func TestControllerImageRefuses(t *testing.T) {
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	exe := testbin.Static(t)
	b := controllerImageBuiltin{exe: func() (string, error) { return exe, nil }}
	env, _ := steptest.Env(t)
	_, err := b.Run(t.Context(), env, b.Spec().WithDefaults(step.Args{"repo": "kubexm.local/kubexm-controller", "version": "1", "arch": other}))
	if err == nil || !strings.Contains(err.Error(), "hosts are linux/"+other) {
		t.Errorf("another architecture: %v", err)
	}
	dynamic := ""
	for _, p := range []string{"/bin/sh", "/usr/bin/env", "/bin/true"} {
		if checkStatic(p) != nil {
			dynamic = p
			break
		}
	}
	if dynamic == "" {
		t.Skip("no dynamically linked binary here to refuse")
	}
	b = controllerImageBuiltin{exe: func() (string, error) { return dynamic, nil }}
	_, err = b.Run(t.Context(), env, b.Spec().WithDefaults(step.Args{"repo": "kubexm.local/kubexm-controller", "version": "1", "arch": runtime.GOARCH}))
	if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("a dynamic binary: %v", err)
	}
}
