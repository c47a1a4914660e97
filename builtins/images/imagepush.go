package images

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/imagepush"
)

// registryArgs are the arguments that say which registry and how to log
// in, shared by image_push and registry_check.
var registryArgs = []step.Arg{
	{Name: "registry", Type: step.String, Required: true, Doc: "The registry: host[:port], optionally with a project path (spec.registry.privateRegistry)."},
	{Name: "namespace", Type: step.String, Doc: "Path replacing each image's own but its last element (spec.registry.namespaceOverride)."},
	{Name: "auths", Type: step.Map, Doc: "Credentials and connection settings per registry host, as spec.registry.auths (username, password, certsPath, skipTLSVerify, plainHTTP)."},
	{Name: "ca_file", Type: step.String, Doc: "One more CA to trust (PEM, on the control machine, under the work directory unless absolute): the cluster CA of the registry kubexm deploys."},
}

func registryTarget(env *step.Env, args step.Args) imagepush.Target {
	reg := args.String("registry")
	host := strings.SplitN(reg, "/", 2)[0]
	a := args.Map("auths")[host]
	m, _ := a.(map[string]any)
	return imagepush.Target{
		Registry:  reg,
		Namespace: args.String("namespace"),
		Auth: imagepush.Auth{
			Username:      str(m["username"]),
			Password:      str(m["password"]),
			CertsDir:      str(m["certsPath"]),
			SkipTLSVerify: truthy(m["skipTLSVerify"]),
			PlainHTTP:     truthy(m["plainHTTP"]),
			CAFile:        underWorkDir(env, args.String("ca_file")),
		},
	}
}

func underWorkDir(env *step.Env, p string) string {
	if p == "" || filepath.IsAbs(p) || env.WorkDir == "" {
		return p
	}
	return filepath.Join(env.WorkDir, p)
}

// imagePushBuiltin pushes image tarballs of the control machine to a
// registry with the imagepush package (as kubexm artifact images push).
type imagePushBuiltin struct{}

func (imagePushBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "image_push",
		Summary: "Push image tarballs of the control machine to a registry, each under the name the cluster pulls it by.",
		Doc: "Runs on the control machine, as `kubexm artifact images push`: it logs in, then pushes the tarballs " +
			"(docker-archive) 4 at a time, the architectures of one name as one multi-arch index, each image with its " +
			"tarball's digest, blobs the registry has not sent, an image whose tag already names its digest left alone " +
			"(ok, unchanged). --check asks the registry which images it lacks and sends nothing. The result holds `sent` " +
			"and `skipped` (bytes) and `images` (target, digest, archs).",
		Control: true,
		Args: append([]step.Arg{
			{Name: "images", Type: step.List, Required: true, Doc: "Tarballs: each a mapping with ref (the name in the tarball), arch and file (under the work directory unless absolute)."},
			{Name: "jobs", Type: step.Int, Default: 4, Doc: "Images pushed at once."},
		}, registryArgs...),
		Examples: []string{"image_push:\n  registry: \"{{ .spec.registry.privateRegistry }}\"\n  auths: \"{{ .spec.registry.auths }}\"\n" +
			"  images: [{ref: registry.k8s.io/pause:3.10.2, arch: amd64, file: images/pause/3.10.2/amd64/pause-3.10.2-amd64.tar}]"},
	}
}

func (imagePushBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	var images []imagepush.Image
	for i, it := range args.List("images") {
		m, ok := it.(map[string]any)
		if !ok || str(m["ref"]) == "" || str(m["arch"]) == "" || str(m["file"]) == "" {
			return step.Result{}, fmt.Errorf("image_push: images[%d] needs ref, arch and file", i)
		}
		f := str(m["file"])
		if !filepath.IsAbs(f) {
			if env.WorkDir == "" {
				return step.Result{}, fmt.Errorf("image_push: %s is relative and no work directory is set", f)
			}
			f = filepath.Join(env.WorkDir, f)
		}
		if _, err := os.Stat(f); err != nil && env.Check {
			// A fresh control machine under --check fetched nothing.
			return step.Result{Changed: true, Msg: "would push the images (" + f + " is not fetched yet)"}, nil
		}
		images = append(images, imagepush.Image{Ref: str(m["ref"]), Arch: str(m["arch"]), File: f})
	}
	tgt := registryTarget(env, args)
	if err := imagepush.Check(ctx, tgt); err != nil {
		return step.Result{}, fmt.Errorf("image_push: %w", err)
	}
	res, err := imagepush.Push(ctx, tgt, images, imagepush.Options{Jobs: args.Int("jobs"), DryRun: env.Check})
	if err != nil {
		return step.Result{}, fmt.Errorf("image_push: %w", err)
	}
	var list []any
	var changed []string
	for _, p := range res.Images {
		list = append(list, map[string]any{"target": p.Target, "digest": p.Digest, "archs": p.Archs, "sent": p.Sent})
		if p.Pending || p.Sent > 0 || p.Skipped == 0 {
			changed = append(changed, p.Target)
		}
	}
	data := map[string]any{"sent": res.Sent, "skipped": res.Skipped, "images": list}
	if len(changed) == 0 {
		return step.Result{Data: data}, nil
	}
	verb := "pushed"
	if env.Check {
		verb = "would push"
	}
	return step.Result{Changed: true, Data: data,
		Msg: fmt.Sprintf("%s %s to %s (%.1f MiB sent, %.1f MiB already there)", verb, strings.Join(changed, ", "), tgt.Registry, float64(res.Sent)/(1<<20), float64(res.Skipped)/(1<<20))}, nil
}

// registryCheckBuiltin logs in to a registry and looks for images: the
// preflight of a cluster whose nodes pull from it.
type registryCheckBuiltin struct{}

func (registryCheckBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "registry_check",
		Summary: "Log in to a registry from the control machine and fail naming the images it does not serve.",
		Doc: "Read-only, also under --check. Fails with the registry, the image and a hint when the registry is " +
			"unreachable, refuses the credentials or presents a certificate the CA in certsPath did not sign, or " +
			"lacks an image of `images`.",
		Control: true,
		Args: append([]step.Arg{
			{Name: "images", Type: step.List, Doc: "Image names in the registry that must be there."},
		}, registryArgs...),
	}
}

func (registryCheckBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	tgt := registryTarget(env, args)
	missing, err := imagepush.Missing(ctx, tgt, args.Strings("images"))
	if err != nil {
		return step.Result{}, fmt.Errorf("registry_check: %w", err)
	}
	if len(missing) > 0 {
		return step.Result{}, fmt.Errorf("registry_check: registry %s does not serve %s (hint: push the images with kubexm artifact images push -f <cluster.yaml> --offline-bundle <bundle>)", tgt.Registry, strings.Join(missing, ", "))
	}
	return step.Result{Msg: fmt.Sprintf("%s serves the %d images", tgt.Registry, len(args.Strings("images")))}, nil
}
