// Package imagepush copies the image tarballs of an offline bundle (or of a
// work directory) into a private registry: each image under the name the
// cluster pulls it by, the images of one name and several architectures as
// one multi-arch index, blobs the registry already has not sent again, and
// the manifests byte for byte as the tarballs define them, so that a pushed
// image's digest is the tarball's. It knows nothing of cluster.yaml: the
// caller says where to push and with which credentials.
package imagepush

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Target is the registry images go to.
type Target struct {
	// Registry is host[:port], optionally followed by a path (a Harbor
	// project): registry.privateRegistry.
	Registry string
	// Namespace replaces each image's own path but its last element
	// (registry.namespaceOverride).
	Namespace string
	Auth      Auth
}

// Image is one image tarball (docker-archive) for one architecture.
type Image struct {
	// Ref is the name the tarball gives the image: upstream's, or already
	// the private registry's.
	Ref  string
	Arch string
	File string
}

// Options tune a push.
type Options struct {
	// Jobs is how many images are pushed at once (default 4).
	Jobs int
	// DryRun stops at finding out which images the registry lacks: they
	// are in the result with Pending set, nothing is sent.
	DryRun bool
	// Progress, when set, is called (from several goroutines, never at
	// once) as bytes go out and as each image is done.
	Progress func(Event)
}

// Event reports progress.
type Event struct {
	// Sent is the number of blob bytes sent so far over all images.
	Sent int64
	// Done is set when an image (all its architectures) is in the
	// registry; Pushed is its result.
	Done   bool
	Pushed Pushed
}

// Pushed is what happened to one image name.
type Pushed struct {
	Target string
	Digest string
	Archs  []string
	// Sent is the bytes of blobs sent; Skipped the bytes the registry
	// already had.
	Sent, Skipped int64
	// Pending: DryRun found the tag missing or naming another digest.
	Pending bool
}

// Result is the outcome of Push: only images whose manifest the registry
// accepted are in Images.
type Result struct {
	Images        []Pushed
	Sent, Skipped int64
	Elapsed       time.Duration
}

// TargetRef is the name an image has in the target registry: the path of
// ref without its registry host (or without Registry when ref already
// names it), under Namespace when set, as roles/artifacts' images_refs
// names the images the nodes pull.
func TargetRef(t Target, ref string) (string, error) {
	tag, err := name.NewTag(ref, name.WeakValidation)
	if err != nil {
		return "", fmt.Errorf("image %q: %w", ref, err)
	}
	reg := strings.TrimSuffix(t.Registry, "/")
	var path string
	if strings.HasPrefix(ref, reg+"/") {
		path = strings.TrimPrefix(tag.Context().Name(), reg+"/")
	} else {
		path = tag.RepositoryStr()
		// name.NewTag turns docker.io's one-element names into library/x;
		// the cluster's names keep what the catalogue wrote.
		if tag.RegistryStr() == name.DefaultRegistry && !strings.Contains(strings.SplitN(ref, ":", 2)[0], "/library/") && !strings.HasPrefix(ref, "library/") {
			path = strings.TrimPrefix(path, "library/")
		}
	}
	if t.Namespace != "" {
		path = t.Namespace + "/" + path[strings.LastIndex(path, "/")+1:]
	}
	out := reg + "/" + path + ":" + tag.TagStr()
	if _, err := name.NewTag(out, name.StrictValidation); err != nil {
		return "", fmt.Errorf("image %q as %q: %w", ref, out, err)
	}
	return out, nil
}

type group struct {
	target string
	images []Image
}

// groups collects the tarballs by target name, architectures sorted.
func groups(t Target, images []Image) ([]group, error) {
	by := map[string]*group{}
	var order []string
	for _, im := range images {
		ref, err := TargetRef(t, im.Ref)
		if err != nil {
			return nil, err
		}
		g := by[ref]
		if g == nil {
			g = &group{target: ref}
			by[ref] = g
			order = append(order, ref)
		}
		for _, o := range g.images {
			if o.Arch == im.Arch {
				return nil, fmt.Errorf("image %s: two tarballs for %s (%s and %s)", ref, im.Arch, o.File, im.File)
			}
		}
		g.images = append(g.images, im)
	}
	sort.Strings(order)
	out := make([]group, 0, len(order))
	for _, r := range order {
		g := by[r]
		sort.Slice(g.images, func(i, j int) bool { return g.images[i].Arch < g.images[j].Arch })
		out = append(out, *g)
	}
	return out, nil
}

// Push sends every image to the target. It stops at the first failure
// (the images pushed until then are in the result) and names the
// registry, the image and a hint in the error.
func Push(ctx context.Context, t Target, images []Image, opt Options) (*Result, error) {
	start := time.Now()
	gs, err := groups(t, images)
	if err != nil {
		return nil, err
	}
	c, err := newClient(t)
	if err != nil {
		return nil, err
	}
	jobs := opt.Jobs
	if jobs <= 0 {
		jobs = 4
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		res      = &Result{}
		firstErr error
		sent     atomic.Int64
		wg       sync.WaitGroup
		sem      = make(chan struct{}, jobs)
	)
	report := func(ev Event) {
		if opt.Progress != nil {
			mu.Lock()
			defer mu.Unlock()
			opt.Progress(ev)
		}
	}
	for _, g := range gs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func(g group) {
			defer wg.Done()
			defer func() { <-sem }()
			p, err := c.pushGroup(ctx, g, opt.DryRun, func(n int64) { report(Event{Sent: sent.Add(n)}) })
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
					cancel()
				}
				mu.Unlock()
				return
			}
			mu.Lock()
			res.Images = append(res.Images, p)
			res.Sent += p.Sent
			res.Skipped += p.Skipped
			mu.Unlock()
			report(Event{Sent: sent.Load(), Done: true, Pushed: p})
		}(g)
	}
	wg.Wait()
	sort.Slice(res.Images, func(i, j int) bool { return res.Images[i].Target < res.Images[j].Target })
	res.Elapsed = time.Since(start)
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return res, firstErr
}

// Check logs in to the registry with the target's credentials: the
// preflight of a push and of a cluster whose nodes pull from it.
func Check(ctx context.Context, t Target) error {
	c, err := newClient(t)
	if err != nil {
		return err
	}
	return c.check(ctx)
}

type client struct {
	t    Target
	reg  name.Registry
	base http.RoundTripper
	auth authn.Authenticator
}

func newClient(t Target) (*client, error) {
	host := strings.SplitN(strings.TrimSuffix(t.Registry, "/"), "/", 2)[0]
	var opts []name.Option
	if t.Auth.PlainHTTP {
		opts = append(opts, name.Insecure)
	}
	reg, err := name.NewRegistry(host, append(opts, name.StrictValidation)...)
	if err != nil {
		return nil, fmt.Errorf("registry %q: %w", t.Registry, err)
	}
	base, err := t.Auth.transport()
	if err != nil {
		return nil, fmt.Errorf("registry %s: %w", host, err)
	}
	auth := authn.Anonymous
	if t.Auth.Username != "" {
		auth = &authn.Basic{Username: t.Auth.Username, Password: t.Auth.Password}
	}
	return &client{t: t, reg: reg, base: base, auth: auth}, nil
}

func (c *client) options(ctx context.Context, rt http.RoundTripper) []remote.Option {
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuth(c.auth),
		remote.WithTransport(rt),
		remote.WithJobs(4),
		// A registry that refuses or is away answers the same on a second
		// try; one retry covers a dropped connection.
		remote.WithRetryBackoff(remote.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Steps: 2}),
	}
}

// check asks GET /v2/ with the credentials: 200 only when they are good
// (a registry with basic auth accepts any name at the ping otherwise).
func (c *client) check(ctx context.Context) error {
	repo := c.reg.Repo("kubexm-preflight")
	rt, err := transportFor(ctx, c, repo)
	if err != nil {
		return c.explain("", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s://%s/v2/", c.reg.Scheme(), c.reg.RegistryStr()), nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return c.explain("", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return c.explain("", &statusError{code: resp.StatusCode})
	}
	return nil
}

func (c *client) pushGroup(ctx context.Context, g group, dryRun bool, progress func(int64)) (Pushed, error) {
	p := Pushed{Target: g.target}
	ref, err := name.NewTag(g.target, name.StrictValidation)
	if err != nil {
		return p, err
	}
	var imgs []v1.Image
	var total int64
	for _, im := range g.images {
		img, err := loadTarball(im)
		if err != nil {
			return p, fmt.Errorf("image %s (%s): %w", im.Ref, im.File, err)
		}
		size, err := imageSize(img)
		if err != nil {
			return p, fmt.Errorf("image %s (%s): %w", im.Ref, im.File, err)
		}
		total += size
		imgs = append(imgs, img)
		p.Archs = append(p.Archs, im.Arch)
	}
	var digest v1.Hash
	var idx v1.ImageIndex
	if len(imgs) == 1 {
		if digest, err = imgs[0].Digest(); err != nil {
			return p, fmt.Errorf("image %s: %w", g.images[0].File, err)
		}
	} else {
		if idx, err = index(imgs, g.images); err != nil {
			return p, err
		}
		if digest, err = idx.Digest(); err != nil {
			return p, fmt.Errorf("image %s: %w", g.target, err)
		}
	}
	p.Digest = digest.String()
	counter := &countingTransport{inner: c.base, progress: progress}
	opts := c.options(ctx, counter)
	// The tag already names this very manifest: nothing to send.
	if d, err := remote.Head(ref, opts...); err == nil && d.Digest == digest {
		p.Skipped = total
		return p, nil
	} else if err != nil && !isNotFound(err) {
		return p, c.explain(g.target, err)
	}
	if dryRun {
		p.Pending = true
		return p, nil
	}
	if idx != nil {
		err = remote.WriteIndex(ref, idx, opts...)
	} else {
		err = remote.Write(ref, imgs[0], opts...)
	}
	if err != nil {
		return p, c.explain(g.target, err)
	}
	// What the registry now serves under the tag must be what was sent.
	d, err := remote.Head(ref, opts...)
	if err != nil {
		return p, c.explain(g.target, err)
	}
	if d.Digest != digest {
		return p, fmt.Errorf("registry %s: image %s: the registry serves digest %s after the push of %s; another push of the same tag may be running", c.reg.RegistryStr(), g.target, d.Digest, digest)
	}
	p.Sent = counter.blobBytes.Load()
	p.Skipped = max(total-p.Sent, 0)
	return p, nil
}

// index is the multi-arch index of the images of one name, each with the
// platform its configuration names.
func index(imgs []v1.Image, src []Image) (v1.ImageIndex, error) {
	var adds []mutate.IndexAddendum
	for i, img := range imgs {
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, fmt.Errorf("image %s (%s): %w", src[i].Ref, src[i].File, err)
		}
		desc, err := partialDescriptor(img)
		if err != nil {
			return nil, fmt.Errorf("image %s (%s): %w", src[i].Ref, src[i].File, err)
		}
		desc.Platform = &v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}
		if desc.Platform.OS == "" {
			desc.Platform.OS = "linux"
		}
		if desc.Platform.Architecture == "" {
			desc.Platform.Architecture = src[i].Arch
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: *desc})
	}
	mt, err := imgs[0].MediaType()
	if err != nil {
		return nil, err
	}
	indexType := types.OCIImageIndex
	if mt == types.DockerManifestSchema2 {
		indexType = types.DockerManifestList
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, indexType), adds...), nil
}

func partialDescriptor(img v1.Image) (*v1.Descriptor, error) {
	mt, err := img.MediaType()
	if err != nil {
		return nil, err
	}
	d, err := img.Digest()
	if err != nil {
		return nil, err
	}
	s, err := img.Size()
	if err != nil {
		return nil, err
	}
	return &v1.Descriptor{MediaType: mt, Digest: d, Size: s}, nil
}

// imageSize is the bytes of the image's config and (compressed) layers.
func imageSize(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	n := m.Config.Size
	seen := map[v1.Hash]bool{}
	for _, l := range m.Layers {
		if !seen[l.Digest] {
			seen[l.Digest] = true
			n += l.Size
		}
	}
	return n, nil
}

// countingTransport counts the bytes of blob uploads that went out.
type countingTransport struct {
	inner     http.RoundTripper
	progress  func(int64)
	blobBytes atomic.Int64
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil && (req.Method == http.MethodPatch || req.Method == http.MethodPut) && strings.Contains(req.URL.Path, "/blobs/uploads/") {
		req.Body = &countingBody{ReadCloser: req.Body, c: c}
	}
	return c.inner.RoundTrip(req)
}

type countingBody struct {
	io.ReadCloser
	c *countingTransport
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.c.blobBytes.Add(int64(n))
		if b.c.progress != nil {
			b.c.progress(int64(n))
		}
	}
	return n, err
}

func isNotFound(err error) bool {
	var se *statusError
	if errors.As(err, &se) {
		return se.code == http.StatusNotFound
	}
	code := httpStatus(err)
	return code == http.StatusNotFound
}

// Missing lists the refs (names in the target registry) the registry does
// not serve, after logging in: what a cluster pulling from it would miss.
func Missing(ctx context.Context, t Target, refs []string) ([]string, error) {
	c, err := newClient(t)
	if err != nil {
		return nil, err
	}
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	var missing []string
	for _, r := range refs {
		ref, err := name.ParseReference(r, name.StrictValidation)
		if err != nil {
			return nil, fmt.Errorf("image %q: %w", r, err)
		}
		if _, err := remote.Head(ref, c.options(ctx, c.base)...); err != nil {
			if !isNotFound(err) {
				return nil, c.explain(r, err)
			}
			missing = append(missing, r)
		}
	}
	return missing, nil
}

// loadTarball reads the image of a docker-archive: the one image it holds
// (a bundle exported before privateRegistry was set names it upstream's
// way), else the one tagged im.Ref.
func loadTarball(im Image) (v1.Image, error) {
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(im.File) })
	if err != nil {
		return nil, err
	}
	if len(m) == 1 {
		return tarball.ImageFromPath(im.File, nil)
	}
	tag, err := name.NewTag(im.Ref, name.WeakValidation)
	if err != nil {
		return nil, err
	}
	return tarball.ImageFromPath(im.File, &tag)
}
