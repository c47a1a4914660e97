package images

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/engine/step"
)

// image_push sends a tarball of the work directory under the cluster's
// name; a second run and --check then change nothing. registry_check
// names an image the registry lacks.
func TestImagePushAndRegistryCheck(t *testing.T) {
	ctx := context.Background()
	host := registryHost(t, nil)
	env, _ := steptest.Env(t)
	rel := "images/pause/3.10/amd64/pause-3.10-amd64.tar"
	p := filepath.Join(env.WorkDir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag("registry.k8s.io/pause:3.10")
	if err := tarball.WriteToFile(p, tag, platformImage(t, "amd64")); err != nil {
		t.Fatal(err)
	}
	args := step.Args{
		"registry": host, "namespace": "kx",
		"auths":  map[string]any{host: map[string]any{"plainHTTP": true}},
		"images": []any{map[string]any{"ref": "registry.k8s.io/pause:3.10", "arch": "amd64", "file": rel}},
	}
	b := imagePushBuiltin{}
	env.Check = true
	res, err := steptest.RunBuiltin(ctx, env, b, args)
	if err != nil || !res.Changed || !strings.Contains(res.Msg, "would push "+host+"/kx/pause:3.10") {
		t.Fatalf("--check on an empty registry: %+v, %v", res, err)
	}
	check := registryCheckBuiltin{}
	checkArgs := step.Args{"registry": host, "auths": args["auths"], "images": []any{host + "/kx/pause:3.10"}}
	if _, err := steptest.RunBuiltin(ctx, env, check, checkArgs); err == nil || !strings.Contains(err.Error(), "does not serve "+host+"/kx/pause:3.10") || !strings.Contains(err.Error(), "kubexm artifact images push") {
		t.Errorf("registry_check before the push: %v", err)
	}
	env.Check = false
	res, err = steptest.RunBuiltin(ctx, env, b, args)
	if err != nil || !res.Changed || res.Data["sent"].(int64) == 0 {
		t.Fatalf("push: %+v, %v", res, err)
	}
	for _, c := range []bool{false, true} {
		env.Check = c
		res, err = steptest.RunBuiltin(ctx, env, b, args)
		if err != nil || res.Changed || res.Data["sent"].(int64) != 0 {
			t.Errorf("again (check %v): %+v, %v; want unchanged, 0 sent", c, res, err)
		}
	}
	if _, err := steptest.RunBuiltin(ctx, env, check, checkArgs); err != nil {
		t.Errorf("registry_check after the push: %v", err)
	}
}
