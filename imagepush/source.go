package imagepush

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/mensylisir/kubexm/bundle"
)

// FromBundle lists the image tarballs of a bundle unpacked in dir (what
// bundle.Open returns), under the names the bundle's manifest gives them.
func FromBundle(dir string, m *bundle.Manifest) ([]Image, error) {
	var out []Image
	for _, a := range m.Artifacts {
		if a.Kind != "image" {
			continue
		}
		if a.Image == "" {
			return nil, fmt.Errorf("offline bundle: image %s has no name in manifest.json", a.Path)
		}
		out = append(out, Image{Ref: a.Image, Arch: a.Arch, File: filepath.Join(dir, filepath.FromSlash(a.Path))})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("offline bundle: no image in it (kubexm artifact export packs the images the cluster needs)")
	}
	return out, nil
}

// FromWorkDir lists the image tarballs a run fetched into a work
// directory (images/<name>/<tag>/<arch>/<file>.tar), named by the tag
// each tarball holds.
func FromWorkDir(workDir string) ([]Image, error) {
	files, err := filepath.Glob(filepath.Join(workDir, "images", "*", "*", "*", "*.tar"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []Image
	for _, f := range files {
		m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(f) })
		if err != nil {
			return nil, fmt.Errorf("image tarball %s: %w", f, err)
		}
		if len(m) != 1 || len(m[0].RepoTags) != 1 {
			return nil, fmt.Errorf("image tarball %s: want one image with one tag, as kubexm artifact export writes", f)
		}
		arch := filepath.Base(filepath.Dir(f))
		out = append(out, Image{Ref: m[0].RepoTags[0], Arch: arch, File: f})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no image tarball in %s: give --offline-bundle, or run kubexm artifact export (or a play that fetches the images) first", filepath.Join(workDir, "images"))
	}
	return out, nil
}
