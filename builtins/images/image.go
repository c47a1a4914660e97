package images

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/mensylisir/kubexm/builtins/controlfs"
	"github.com/mensylisir/kubexm/builtins/onhost"
	"github.com/mensylisir/kubexm/builtins/transfer"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/internal/flock"
)

// imageSaveBuiltin pulls an image from a registry into a docker-archive
// tarball on the control machine. Like download it is a Control builtin
// working on the local file system: the tarball is written while the layers
// stream in, never held in memory.
type imageSaveBuiltin struct {
	// backoff is the first wait between attempts; it doubles each time.
	backoff time.Duration
}

func newImageSave() imageSaveBuiltin { return imageSaveBuiltin{backoff: time.Second} }

func (imageSaveBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "image_save",
		Summary: "Pull an image from a registry into a docker-archive tarball on the control machine (ctr images import reads it).",
		Doc: "Runs on the control machine. The image for `platform` is taken from a multi-platform index; a single-platform " +
			"image of another platform is an error. The tarball is what `docker save` writes (layers compressed as in the " +
			"registry), with the image named `tag` inside, so `ctr -n k8s.io images import` and `docker load` name it so. " +
			"It is written to `<dest>.part` while the layers stream in and renamed when complete. A tarball already at dest " +
			"holding the same image (config digest) under `tag` is left alone (ok, unchanged); only the manifest is fetched " +
			"to find out. Credentials: `username`/`password`, else the entry of `auths` for the registry's host (the shape of " +
			"cluster.yaml's spec.registry.auths: username, password, skipTLSVerify, plainHTTP), else anonymous. The result " +
			"holds `dest`, `sha256` and `size` of the tarball, `digest` (the manifest's) and `image_id` (the config digest).",
		Control: true,
		Args: []step.Arg{
			{Name: "ref", Type: step.String, Required: true, Doc: "Image to pull: registry/repository:tag or @sha256:digest."},
			{Name: "dest", Type: step.String, Required: true, Doc: "Tarball to write, under the work directory unless absolute."},
			{Name: "tag", Type: step.String, Doc: "Name recorded in the tarball (repository:tag); default ref, which must then be a tag."},
			{Name: "platform", Type: step.String, Default: "linux/amd64", Doc: "os/arch[/variant] to take from a multi-platform image."},
			{Name: "username", Type: step.String, Doc: "Registry user."},
			{Name: "password", Type: step.String, Doc: "Registry password."},
			{Name: "auths", Type: step.Map, Doc: "Credentials and connection settings per registry host, as spec.registry.auths."},
			{Name: "insecure", Type: step.Bool, Default: false, Doc: "Do not verify the registry's TLS certificate."},
			{Name: "plain_http", Type: step.Bool, Default: false, Doc: "Reach the registry over plain HTTP (loopback addresses always are)."},
			{Name: "retries", Type: step.Int, Default: 3, Doc: "Attempts."},
			{Name: "timeout", Type: step.Duration, Default: "30m", Doc: "Limit for one attempt."},
		},
		Examples: []string{"image_save:\n  ref: registry.k8s.io/pause:{{ .pause_version }}\n  dest: images/pause/{{ .pause_version }}/{{ .arch }}/pause-{{ .pause_version }}-{{ .arch }}.tar\n" +
			"  platform: linux/{{ .arch }}\n  auths: \"{{ .spec.registry.auths }}\""},
	}
}

// imageSource is a parsed image_save task: what to pull, how, and the name
// it gets in the tarball.
type imageSource struct {
	ref      name.Reference
	tag      name.Tag
	platform *v1.Platform
	opts     []remote.Option
}

func (b imageSaveBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	src, err := parseImageSource(args)
	if err != nil {
		return step.Result{}, fmt.Errorf("image_save: %w", err)
	}
	dest, err := controlfs.ResolveDest(env, args.String("dest"), "")
	if err != nil {
		return step.Result{}, fmt.Errorf("image_save: %w", err)
	}
	data := map[string]any{"dest": dest, "ref": src.ref.String(), "tag": src.tag.String()}
	retries := max(args.Int("retries"), 1)
	timeout := args.Duration("timeout")

	var img v1.Image
	err = b.attempt(ctx, env, retries, "fetch "+src.ref.String(), func(ctx context.Context) error {
		img, err = src.image(ctx)
		return err
	})
	if err != nil {
		return step.Result{}, fmt.Errorf("image_save: %w", err)
	}
	id, err := img.ConfigName()
	if err != nil {
		return step.Result{}, fmt.Errorf("image_save: %s: %w", src.ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return step.Result{}, fmt.Errorf("image_save: %s: %w", src.ref, err)
	}
	data["image_id"], data["digest"] = id.String(), digest.String()
	if same, err := tarballHolds(dest, src.tag, id); err != nil {
		return step.Result{}, fmt.Errorf("image_save: %w", err)
	} else if same {
		if err := fileFacts(dest, data); err != nil {
			return step.Result{}, fmt.Errorf("image_save: %w", err)
		}
		return step.Result{Data: data}, nil
	}
	if env.Check {
		return step.Result{Changed: true, Msg: "would save " + src.ref.String() + " to " + dest, Data: data}, nil
	}
	// The config is small; reading it checks the platform before the layers
	// are fetched.
	cfg, err := img.ConfigFile()
	if err != nil {
		return step.Result{}, fmt.Errorf("image_save: %s: %w", src.ref, err)
	}
	if p := src.platform; cfg.OS != p.OS || cfg.Architecture != p.Architecture || (p.Variant != "" && cfg.Variant != "" && cfg.Variant != p.Variant) {
		got := cfg.OS + "/" + cfg.Architecture
		if cfg.Variant != "" {
			got += "/" + cfg.Variant
		}
		return step.Result{}, fmt.Errorf("image_save: %s is a %s image, not %s", src.ref, got, p)
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return step.Result{}, fmt.Errorf("image_save: %w", err)
	}
	unlock, err := flock.Lock(ctx, filepath.Dir(dest))
	if err != nil {
		return step.Result{}, err
	}
	defer unlock()
	// Another host's run may have saved it while we waited.
	if same, err := tarballHolds(dest, src.tag, id); err == nil && same {
		if err := fileFacts(dest, data); err != nil {
			return step.Result{}, fmt.Errorf("image_save: %w", err)
		}
		return step.Result{Data: data}, nil
	}
	err = b.attempt(ctx, env, retries, "save "+src.ref.String(), func(ctx context.Context) error {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		// Layers are fetched lazily through the options' context: fetch the
		// image again under this attempt's context.
		img, err := src.image(ctx)
		if err != nil {
			return err
		}
		sum, size, err := writeTarball(env, dest, src.tag, img)
		if err != nil {
			return err
		}
		data["sha256"], data["size"] = sum, size
		return nil
	})
	if err != nil {
		return step.Result{}, fmt.Errorf("image_save: %w", err)
	}
	return step.Result{Changed: true, Msg: "saved " + src.ref.String() + " to " + dest, Data: data}, nil
}

// attempt runs f up to retries times with a doubling pause, stopping at once
// when ctx is done or the failure cannot be cured by waiting.
func (b imageSaveBuiltin) attempt(ctx context.Context, env *step.Env, retries int, what string, f func(context.Context) error) error {
	var err error
	for i := 1; i <= retries; i++ {
		if err = f(ctx); err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", what, ctx.Err())
		}
		if permanentRegistryError(err) || i == retries {
			break
		}
		onhost.Logf(env, "%s (attempt %d/%d): %v", what, i, retries, err)
		if err := onhost.Sleep(ctx, b.backoff<<(i-1)); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// permanentRegistryError is a refusal retrying will not change: unknown
// image, denied, unauthorized.
func permanentRegistryError(err error) bool {
	var re interface{ Temporary() bool }
	if errors.As(err, &re) {
		return !re.Temporary()
	}
	return false
}

func parseImageSource(args step.Args) (*imageSource, error) {
	refStr := strings.TrimSpace(args.String("ref"))
	// Settings for the registry: the auths entry of its host, then the
	// task's own arguments.
	probe, err := name.ParseReference(refStr)
	if err != nil {
		return nil, fmt.Errorf("ref %q: %w", refStr, err)
	}
	host := probe.Context().RegistryStr()
	auth := registryAuth(args.Map("auths"), host)
	user, pass := args.String("username"), args.String("password")
	if user == "" && pass == "" {
		user, pass = str(auth["username"]), str(auth["password"])
	}
	insecure := args.Bool("insecure") || truthy(auth["skipTLSVerify"])
	plain := args.Bool("plain_http") || truthy(auth["plainHTTP"])
	var nameOpts []name.Option
	if plain {
		nameOpts = append(nameOpts, name.Insecure)
	}
	ref, err := name.ParseReference(refStr, nameOpts...)
	if err != nil {
		return nil, fmt.Errorf("ref %q: %w", refStr, err)
	}
	tagStr := strings.TrimSpace(args.String("tag"))
	if tagStr == "" {
		t, ok := ref.(name.Tag)
		if !ok {
			return nil, fmt.Errorf("ref %s has no tag: give tag, the name the tarball records", refStr)
		}
		tagStr = t.String()
	}
	tag, err := name.NewTag(tagStr)
	if err != nil {
		return nil, fmt.Errorf("tag %q: %w", tagStr, err)
	}
	plat := args.String("platform")
	p, err := v1.ParsePlatform(plat)
	if err != nil {
		return nil, fmt.Errorf("platform %q: %w", plat, err)
	}
	tr := remote.DefaultTransport.(*http.Transport).Clone()
	if insecure {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // asked for with insecure / skipTLSVerify
	}
	var authenticator authn.Authenticator = authn.Anonymous
	if user != "" || pass != "" {
		authenticator = &authn.Basic{Username: user, Password: pass}
	}
	return &imageSource{
		ref:      ref,
		tag:      tag,
		platform: p,
		opts:     []remote.Option{remote.WithTransport(tr), remote.WithAuth(authenticator), remote.WithPlatform(*p)},
	}, nil
}

func (s *imageSource) image(ctx context.Context) (v1.Image, error) {
	return remote.Image(s.ref, append(s.opts, remote.WithContext(ctx))...)
}

// registryAuth finds host's entry in a spec.registry.auths-shaped map;
// Docker Hub is known under several names.
func registryAuth(auths map[string]any, host string) map[string]any {
	names := []string{host}
	if host == name.DefaultRegistry {
		names = append(names, "docker.io", "registry-1.docker.io", "https://index.docker.io/v1/")
	}
	for _, n := range names {
		for _, k := range []string{n, "https://" + n, "http://" + n} {
			if m, ok := auths[k].(map[string]any); ok {
				return m
			}
		}
	}
	return nil
}

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func truthy(v any) bool {
	b, _ := step.ToBool(v)
	return b
}

// tarballHolds reports whether the docker-archive at p holds the image id
// under tag. A file that is not such an archive (or a torn one) is false.
func tarballHolds(p string, tag name.Tag, id v1.Hash) (bool, error) {
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	img, err := tarball.ImageFromPath(p, &tag)
	if err != nil {
		return false, nil
	}
	have, err := img.ConfigName()
	if err != nil {
		return false, nil
	}
	return have == id, nil
}

// writeTarball streams img into dest.part and renames it to dest, returning
// the tarball's sha256 and size.
func writeTarball(env *step.Env, dest string, tag name.Tag, img v1.Image) (string, int64, error) {
	part := dest + ".part"
	f, err := os.OpenFile(part, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return "", 0, err
	}
	h := sha256.New()
	cw := &countWriter{}
	pw := transfer.NewProgress(env, tag.String(), 0, -1)
	err = tarball.Write(tag, img, io.MultiWriter(f, h, cw, pw))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(part)
		return "", 0, err
	}
	if err := os.Rename(part, dest); err != nil {
		os.Remove(part)
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), cw.n, nil
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(b []byte) (int, error) {
	c.n += int64(len(b))
	return len(b), nil
}

// fileFacts adds the sha256 and size of the file at p to data.
func fileFacts(p string, data map[string]any) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return err
	}
	data["sha256"], data["size"] = hex.EncodeToString(h.Sum(nil)), n
	return nil
}
