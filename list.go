package kubexm

import (
	"fmt"
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
		if h.Name == "" {
			h.Name = strings.TrimSuffix(e.Name(), ".yaml")
		}
		out = append(out, PlaybookInfo{Name: h.Name, Version: h.Version, Description: h.Description, NeedsCluster: h.Inventory == "cluster"})
	}
	return out, nil
}
