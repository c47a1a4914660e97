package cli

import (
	"github.com/mensylisir/kubexm"
	"github.com/spf13/cobra"
)

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
		entries, err := kubexm.Playbooks(a.builtinFS)
		if err != nil {
			return err
		}
		return writeItems(cmd.OutOrStdout(), output, entries)
	}
}
