// Package bundle is kubexm's offline-bundle format: a .tar.gz (or .tar.zst) of files laid
// out as the work directory lays out downloads,
// <component>/<version>/<arch>/<file>, with a SHA256SUMS in every such
// directory (so the download role reads a bundle directory as it reads any
// local directory) and manifest.json first, listing every file with its
// sha256 and size. Pack writes one, Open verifies and unpacks one. Nothing
// here knows what the files are: the artifact-export playbook decides that,
// and writes them as a List.
package bundle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/engine/transport"
)

const (
	// Format and FormatVersion are manifest.json's format and formatVersion.
	Format        = "kubexm-offline-bundle"
	FormatVersion = 1
	ManifestName  = "manifest.json"
	SumsName      = "SHA256SUMS"
	// verifiedMarker in an unpacked bundle's directory holds the bundle's
	// sha256 once every file was verified.
	verifiedMarker = ".kubexm-bundle-verified"
)

// Manifest is manifest.json.
type Manifest struct {
	Format        string     `json:"format"`
	FormatVersion int        `json:"formatVersion"`
	Cluster       string     `json:"cluster"`
	KubexmVersion string     `json:"kubexmVersion"`
	Created       time.Time  `json:"created"`
	Artifacts     []Artifact `json:"artifacts"`
}

// Artifact is one file of a bundle.
type Artifact struct {
	Component string `json:"component"`
	Version   string `json:"version"`
	Arch      string `json:"arch"`
	File      string `json:"file"`
	// Path is <component>/<version>/<arch>/<file>, slash-separated.
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// Kind is binary, archive or image.
	Kind string `json:"kind"`
	// Image is the name an image tarball gives the image (kind image).
	Image string `json:"image,omitempty"`
}

// Kinds are the kinds of artifact a bundle holds, in the order a summary
// lists them.
func Kinds() []string { return []string{"binary", "archive", "image"} }

// ArtifactPath checks an artifact's coordinates and returns its path in
// the bundle (and the work directory).
func ArtifactPath(a Artifact) (string, error) {
	for _, f := range []struct{ name, v string }{{"component", a.Component}, {"version", a.Version}, {"arch", a.Arch}, {"file", a.File}} {
		if f.v == "" {
			return "", fmt.Errorf("artifact %s/%s/%s/%s: empty %s", a.Component, a.Version, a.Arch, a.File, f.name)
		}
	}
	if strings.ContainsAny(a.Version+a.Arch+a.File, "/\\") {
		return "", fmt.Errorf("artifact %s: version, arch and file must not contain a slash (%q, %q, %q)", a.Component, a.Version, a.Arch, a.File)
	}
	p := path.Join(a.Component, a.Version, a.Arch, a.File)
	if err := checkBundlePath(p); err != nil {
		return "", err
	}
	if p != a.Component+"/"+a.Version+"/"+a.Arch+"/"+a.File {
		return "", fmt.Errorf("artifact %s/%s/%s/%s: not a clean path", a.Component, a.Version, a.Arch, a.File)
	}
	if a.File == SumsName || p == ManifestName {
		return "", fmt.Errorf("artifact %s: the file name %s is reserved for the bundle", p, a.File)
	}
	if !slices.Contains(Kinds(), a.Kind) {
		return "", fmt.Errorf("artifact %s: kind %q is not one of %s", p, a.Kind, strings.Join(Kinds(), ", "))
	}
	return p, nil
}

// checkBundlePath refuses names that would leave the unpack directory.
func checkBundlePath(p string) error {
	if p == "" || !fs.ValidPath(p) || strings.Contains(p, "\\") || strings.HasPrefix(p, ".") && p != "." {
		return fmt.Errorf("%q is not a relative path inside the bundle", p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." || part == "." || strings.HasPrefix(part, ".") {
			return fmt.Errorf("%q is not a relative path inside the bundle", p)
		}
	}
	return nil
}

// sumsFile is the SHA256SUMS of dir: sha256sum's format, sorted by name.
func sumsFile(arts []Artifact, dir string) []byte {
	var b strings.Builder
	for _, a := range arts {
		if path.Dir(a.Path) == dir {
			fmt.Fprintf(&b, "%s  %s\n", a.SHA256, path.Base(a.Path))
		}
	}
	return []byte(b.String())
}

func hashFile(ctx context.Context, p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	if !st.Mode().IsRegular() {
		return "", 0, fmt.Errorf("%s is not a regular file", p)
	}
	h := sha256.New()
	n, err := io.Copy(h, transport.ContextReader(ctx, f))
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// Error is a bundle that cannot be used, naming the bundle and, when
// there is one, the file inside it.
type Error struct {
	Bundle, File, Msg string
}

func (e *Error) Error() string {
	if e.File != "" {
		return fmt.Sprintf("offline bundle %s: %s: %s", e.Bundle, e.File, e.Msg)
	}
	return fmt.Sprintf("offline bundle %s: %s", e.Bundle, e.Msg)
}

func parseManifest(data []byte) (*Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("not a valid manifest: %v", err)
	}
	if m.Format != Format {
		return nil, fmt.Errorf("format %q is not %s", m.Format, Format)
	}
	if m.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("format version %d; this kubexm reads version %d bundles", m.FormatVersion, FormatVersion)
	}
	seen := map[string]bool{}
	for _, a := range m.Artifacts {
		p, err := ArtifactPath(a)
		if err != nil {
			return nil, err
		}
		if p != a.Path {
			return nil, fmt.Errorf("artifact %s: path %q does not match its component, version, arch and file", p, a.Path)
		}
		if seen[p] {
			return nil, fmt.Errorf("artifact %s is listed twice", p)
		}
		seen[p] = true
		if b, err := hex.DecodeString(a.SHA256); err != nil || len(b) != sha256.Size || a.SHA256 != strings.ToLower(a.SHA256) {
			return nil, fmt.Errorf("artifact %s: sha256 %q is not 64 lower-case hex digits", p, a.SHA256)
		}
		if a.Size < 0 {
			return nil, fmt.Errorf("artifact %s: negative size", p)
		}
	}
	return &m, nil
}
