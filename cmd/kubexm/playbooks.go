package main

import (
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"
)

// playbookEntry is one built-in playbook for `playbook list -o json|yaml`:
// its header.
type playbookEntry struct {
	Name         string `json:"name"`
	Version      string `json:"version"`
	Description  string `json:"description"`
	NeedsCluster bool   `json:"needsCluster"`
}

// addPlaybookListOutput gives `kubexm playbook list` (play.go's) -o json
// and -o yaml: each playbook's header, for programs. Its text output stays
// the command's own, one name a line.
func addPlaybookListOutput(root *cobra.Command, a *app) {
	list, _, err := root.Find([]string{"playbook", "list"})
	if err != nil || list.Name() != "list" || list.RunE == nil {
		return
	}
	var output string
	addOutputFlag(list, &output, "text")
	text := list.RunE
	list.RunE = func(cmd *cobra.Command, args []string) error {
		if err := checkOutputFormat(output, "text"); err != nil {
			return err
		}
		if output == "text" {
			return text(cmd, args)
		}
		entries, err := builtinPlaybooks(a.builtinFS)
		if err != nil {
			return err
		}
		return writeItems(cmd.OutOrStdout(), output, entries)
	}
}

// builtinPlaybooks reads the header of every playbook under playbooks/ of
// fsys: a directory with playbook.yaml, or a NAME.yaml file.
func builtinPlaybooks(fsys fs.FS) ([]playbookEntry, error) {
	if fsys == nil {
		return nil, fmt.Errorf("this kubexm has no built-in playbooks")
	}
	ents, err := fs.ReadDir(fsys, "playbooks")
	if err != nil {
		return nil, fmt.Errorf("built-in playbooks: %w", err)
	}
	var out []playbookEntry
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
		// A playbook that is a bare list of plays has no header.
		_ = yaml.Unmarshal(data, &h)
		if h.Name == "" {
			h.Name = strings.TrimSuffix(e.Name(), ".yaml")
		}
		out = append(out, playbookEntry{Name: h.Name, Version: h.Version, Description: h.Description, NeedsCluster: h.Inventory == "cluster"})
	}
	return out, nil
}
