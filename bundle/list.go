package bundle

import (
	"encoding/json"
	"errors"
	"path/filepath"
)

// List is what the artifact-export playbook writes to artifacts_list_file:
// where the work directory is and what it fetched there. It is how a
// playbook says what goes into a bundle.
type List struct {
	Cluster   string      `json:"cluster"`
	WorkDir   string      `json:"work_dir"`
	Artifacts []ListEntry `json:"artifacts"`
}

// ListEntry is one fetched file: in <work dir>/<component>/<version>/<arch>/<file>.
type ListEntry struct {
	Component string `json:"component"`
	Version   string `json:"version"`
	Arch      string `json:"arch"`
	File      string `json:"file"`
	Kind      string `json:"kind"`
	Ref       string `json:"ref"` // an image's name, for kind image
}

// ParseList reads a List and returns the files it names as Pack's inputs.
func ParseList(data []byte) (*List, []Input, error) {
	var list List
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, nil, err
	}
	if list.WorkDir == "" || !filepath.IsAbs(list.WorkDir) {
		return nil, nil, errors.New("no absolute work_dir")
	}
	in := make([]Input, 0, len(list.Artifacts))
	for _, e := range list.Artifacts {
		art := Artifact{Component: e.Component, Version: e.Version, Arch: e.Arch, File: e.File, Kind: e.Kind}
		if e.Kind == "image" {
			art.Image = e.Ref
		}
		p, err := ArtifactPath(art)
		if err != nil {
			return nil, nil, err
		}
		in = append(in, Input{Artifact: art, Src: filepath.Join(list.WorkDir, filepath.FromSlash(p))})
	}
	if len(in) == 0 {
		return nil, nil, errors.New("no artifacts; nothing to pack")
	}
	return &list, in, nil
}
