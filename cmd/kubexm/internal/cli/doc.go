package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/engine/step"
)

// newDocCmd prints reference documentation generated from the program's own
// metadata, so docs/builtins.md can never drift from the code.
func newDocCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "doc", Short: "Print generated reference documentation"}
	var out string
	bi := &cobra.Command{
		Use:   "builtins [NAME...]",
		Short: "The builtin step types and their arguments (docs/builtins.md)",
		RunE: func(cmd *cobra.Command, names []string) error {
			list := make([]step.Builtin, 0, len(a.builtins))
			if len(names) == 0 {
				list = builtins.All()
			}
			for _, n := range names {
				b, ok := a.builtins[n]
				if !ok {
					return fmt.Errorf("no builtin %q: `kubexm doc builtins` lists them all", n)
				}
				list = append(list, b)
			}
			md := builtins.Markdown(list)
			if out == "" {
				_, err := fmt.Fprint(cmd.OutOrStdout(), md)
				return err
			}
			return os.WriteFile(out, []byte(md), 0o644)
		},
	}
	bi.Flags().StringVarP(&out, "output", "o", "", "write to this file instead of standard output")
	cmd.AddCommand(bi)
	return cmd
}
