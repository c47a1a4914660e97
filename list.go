package kubexm

import (
	"cmp"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"github.com/goccy/go-yaml"
)

// PlaybookInfo is a built-in playbook as `kubexm playbook list -o json`
// lists it: the header of its playbook.yaml.
type PlaybookInfo struct {
	Name         string `json:"name"`
	Version      string `json:"version"`
	Description  string `json:"description"`
	NeedsCluster bool   `json:"needsCluster"`
	// Ref is what kubexm play takes: the file's name.
	Ref string `json:"-"`
}

// WritePlaybooks lists the playbooks for people: what kubexm play takes,
// one a line.
func WritePlaybooks(w io.Writer, list []PlaybookInfo) error {
	for _, p := range list {
		if _, err := fmt.Fprintln(w, p.Ref); err != nil {
			return err
		}
	}
	return nil
}

// Playbooks lists the playbooks of fsys (Content(), or a tree laid out as
// it is), by file name.
func Playbooks(fsys fs.FS) ([]PlaybookInfo, error) {
	if fsys == nil {
		return nil, fmt.Errorf("this kubexm has no built-in playbooks")
	}
	ents, err := fs.ReadDir(fsys, "playbooks")
	if err != nil {
		return nil, fmt.Errorf("built-in playbooks: %w", err)
	}
	var out []PlaybookInfo
	for _, e := range ents {
		file := path.Join("playbooks", e.Name())
		if e.IsDir() {
			file = path.Join(file, "playbook.yaml")
		}
		data, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil, fmt.Errorf("built-in playbook %s: %w", e.Name(), err)
		}
		var h struct {
			Name        string `yaml:"name"`
			Version     string `yaml:"version"`
			Description string `yaml:"description"`
			Inventory   string `yaml:"inventory"`
		}
		_ = yaml.Unmarshal(data, &h)
		ref := strings.TrimSuffix(e.Name(), ".yaml")
		out = append(out, PlaybookInfo{Name: cmp.Or(h.Name, ref), Version: h.Version, Description: h.Description, NeedsCluster: h.Inventory == "cluster", Ref: ref})
	}
	return out, nil
}
