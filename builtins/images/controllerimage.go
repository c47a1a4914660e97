package images

import (
	"archive/tar"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/mensylisir/kubexm/builtins/controlfs"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/internal/flock"
)

// controllerImageBuiltin makes the image of operator mode's in-cluster
// controller from the kubexm binary that runs it: the playbooks and roles
// are embedded in the binary, so the image needs nothing else, comes from no
// registry and always runs the kubexm the CLI is.
type controllerImageBuiltin struct {
	// exe is the binary to put in the image (os.Executable; tests give
	// another).
	exe func() (string, error)
}

func newControllerImage() controllerImageBuiltin {
	return controllerImageBuiltin{exe: os.Executable}
}

// NewControllerImage is controller_image putting exe's binary in the image
// instead of the running one (tests whose binary is not static).
func NewControllerImage(exe func() (string, error)) step.Builtin {
	return controllerImageBuiltin{exe: exe}
}

// controllerImageBin is where the binary is in the image.
const controllerImageBin = "/usr/local/bin/kubexm"

func (controllerImageBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "controller_image",
		Summary: "Build the kubexm controller's image from this kubexm binary into a docker-archive tarball on the control machine.",
		Doc: "Runs on the control machine. One layer: the running kubexm binary at " + controllerImageBin + " (it must be " +
			"statically linked, as `make build` makes it with CGO_ENABLED=0, and of the hosts' architecture: the image is " +
			"linux/<arch>) and an empty /tmp; entrypoint `kubexm controller`. Files are owned by 0:0 with mtime 0, so the " +
			"same binary gives the same bytes. The image is named `<repo>:<version>-<first 12 hex digits of the binary's " +
			"sha256>`, so another binary is another tag, and written to `<dir>/<tag>/<arch>/<name>-<tag>-<arch>.tar` under " +
			"the work directory (the layout of the images role's tarballs). A tarball already there naming that tag is left " +
			"alone (ok, unchanged). The result holds `ref`, `tag`, `file` (the name), `src` (relative to the work " +
			"directory, for distribute), `dest`, `sha256` and `size`.",
		Control: true,
		Args: []step.Arg{
			{Name: "repo", Type: step.String, Required: true, Doc: "Repository of the image name (no registry serves it: the nodes run it side-loaded)."},
			{Name: "name", Type: step.String, Default: "kubexm-controller", Doc: "Prefix of the tarball's name."},
			{Name: "version", Type: step.String, Required: true, Doc: "kubexm's version, the tag's first part (characters a tag cannot hold become -)."},
			{Name: "arch", Type: step.String, Default: "amd64", Doc: "The architecture of the hosts that run it: must be this binary's."},
			{Name: "dir", Type: step.String, Default: "images/kubexm-controller", Doc: "Directory of the tarballs, under the work directory unless absolute."},
		},
		Examples: []string{"controller_image:\n  repo: kubexm.local/kubexm-controller\n  version: \"{{ .kubexm_version }}\"\n  arch: \"{{ .arch }}\""},
	}
}

// tagUnsafe are the characters an image tag cannot hold.
var tagUnsafe = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

func (b controllerImageBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	arch := args.String("arch")
	if runtime.GOOS != "linux" || arch != runtime.GOARCH {
		return step.Result{}, fmt.Errorf("controller_image: this kubexm is built for %s/%s and the hosts are linux/%s: "+
			"run the playbook with a kubexm built for linux/%s (make release builds every one)", runtime.GOOS, runtime.GOARCH, arch, arch)
	}
	exe, err := b.exe()
	if err != nil {
		return step.Result{}, fmt.Errorf("controller_image: the kubexm binary: %w", err)
	}
	if err := checkStatic(exe); err != nil {
		return step.Result{}, fmt.Errorf("controller_image: %w", err)
	}
	sum, _, err := controlfs.FileSHA256(exe)
	if err != nil {
		return step.Result{}, fmt.Errorf("controller_image: %w", err)
	}
	version := tagUnsafe.ReplaceAllString(args.String("version"), "-")
	if version == "" || version[0] == '.' || version[0] == '-' {
		version = "v" + version
	}
	tagName := fmt.Sprintf("%s-%s", version, sum[:12])
	tag, err := name.NewTag(args.String("repo")+":"+tagName, name.StrictValidation)
	if err != nil {
		return step.Result{}, fmt.Errorf("controller_image: repo %q: %w", args.String("repo"), err)
	}
	file := fmt.Sprintf("%s-%s-%s.tar", args.String("name"), tagName, arch)
	src := filepath.Join(args.String("dir"), tagName, arch, file)
	dest, err := controlfs.ResolveDest(env, src, "")
	if err != nil {
		return step.Result{}, fmt.Errorf("controller_image: %w", err)
	}
	data := map[string]any{"ref": tag.String(), "tag": tagName, "file": file, "src": src, "dest": dest}
	if holdsTag(dest, tag) {
		if err := fileFacts(dest, data); err != nil {
			return step.Result{}, fmt.Errorf("controller_image: %w", err)
		}
		return step.Result{Data: data}, nil
	}
	if env.Check {
		return step.Result{Changed: true, Msg: "would build " + tag.String() + " into " + dest, Data: data}, nil
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return step.Result{}, fmt.Errorf("controller_image: %w", err)
	}
	unlock, err := flock.Lock(ctx, filepath.Dir(dest))
	if err != nil {
		return step.Result{}, err
	}
	defer unlock()
	// The layer goes through a file beside the tarball, not memory: the
	// binary is tens of megabytes.
	layerFile, err := os.CreateTemp(filepath.Dir(dest), ".layer-*.tar")
	if err != nil {
		return step.Result{}, fmt.Errorf("controller_image: %w", err)
	}
	defer os.Remove(layerFile.Name())
	err = writeControllerLayer(layerFile, exe)
	if cerr := layerFile.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return step.Result{}, fmt.Errorf("controller_image: %w", err)
	}
	img, err := controllerImage(layerFile.Name(), arch, tag.String())
	if err != nil {
		return step.Result{}, fmt.Errorf("controller_image: %w", err)
	}
	sha, size, err := writeTarball(env, dest, tag, img)
	if err != nil {
		return step.Result{}, fmt.Errorf("controller_image: %w", err)
	}
	data["sha256"], data["size"] = sha, size
	return step.Result{Changed: true, Msg: "built " + tag.String() + " into " + dest, Data: data}, nil
}

// holdsTag says whether the tarball at p holds an image named tag; the tag
// names the binary, so such a tarball is this image.
func holdsTag(p string, tag name.Tag) bool {
	img, err := tarball.ImageFromPath(p, &tag)
	if err != nil {
		return false
	}
	_, err = img.ConfigName()
	return err == nil
}

// checkStatic refuses a binary that needs a dynamic loader: the image has
// no libc.
func checkStatic(exe string) error {
	f, err := elf.Open(exe)
	if err != nil {
		return fmt.Errorf("the kubexm binary %s: %w", exe, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("the kubexm binary %s is dynamically linked, and the controller's image has no C library: "+
				"build kubexm with CGO_ENABLED=0 (make build does)", exe)
		}
	}
	return nil
}

// writeControllerLayer writes the layer's tar: /tmp, the directories of
// the binary and the binary, every entry 0:0 at mtime 0.
func writeControllerLayer(w io.Writer, exe string) error {
	bin, err := os.Open(exe)
	if err != nil {
		return err
	}
	defer bin.Close()
	st, err := bin.Stat()
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	epoch := time.Unix(0, 0)
	for _, d := range []struct {
		name string
		mode int64
	}{{"tmp/", 0o1777}, {"usr/", 0o755}, {"usr/local/", 0o755}, {"usr/local/bin/", 0o755}} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d.name, Mode: d.mode, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: controllerImageBin[1:], Mode: 0o755, Size: st.Size(), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return err
	}
	if _, err := io.Copy(tw, bin); err != nil {
		return err
	}
	return tw.Close()
}

// controllerImage is the one-layer image of the layer file.
func controllerImage(layerFile, arch, ref string) (v1.Image, error) {
	epoch := time.Unix(0, 0)
	lay, err := tarball.LayerFromFile(layerFile)
	if err != nil {
		return nil, err
	}
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		Architecture: arch,
		OS:           "linux",
		Created:      v1.Time{Time: epoch},
		Config: v1.Config{
			Entrypoint: []string{controllerImageBin, "controller"},
			Env:        []string{"PATH=/usr/local/bin", "HOME=/tmp"},
			WorkingDir: "/tmp",
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{
		Layer:   lay,
		History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "kubexm controller_image", Comment: ref},
	})
}
