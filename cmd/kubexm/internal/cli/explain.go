package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/internal/explain"
	"github.com/mensylisir/kubexm/lifecycle"
)

// newExplainCmd is `kubexm explain FIELD`: kubectl explain for cluster.yaml.
func newExplainCmd() *cobra.Command {
	var output string
	var rolesPath []string
	cmd := &cobra.Command{
		Use:   "explain FIELD",
		Short: "Describe a field of cluster.yaml: type, default, allowed values, whether kubexm installs them",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutputFormat(output, "text"); err != nil {
				return err
			}
			s, err := lifecycle.SupportFromRolesPath(rolesPath)
			if err != nil {
				return err
			}
			f, err := explain.Explain(args[0], s)
			if err != nil {
				return &usageError{msg: err.Error()}
			}
			if output != "text" {
				return writeStructured(cmd.OutOrStdout(), output, f)
			}
			return writeExplanation(cmd.OutOrStdout(), f)
		},
	}
	addOutputFlag(cmd, &output, "text")
	addRolesPathFlag(cmd, &rolesPath)
	return cmd
}

func writeExplanation(w io.Writer, f *explain.Field) error {
	fmt.Fprintf(w, "FIELD:    %s <%s>\n", f.Path, f.Type)
	if f.Description != "" {
		fmt.Fprintf(w, "\nDESCRIPTION:\n%s\n", indentWrap(f.Description, "    ", 76))
	}
	if f.Default != "" {
		fmt.Fprintf(w, "\nDEFAULT:  %s\n", f.Default)
	}
	if len(f.Allowed) > 0 {
		fmt.Fprintf(w, "\nALLOWED VALUES:  %s\n", strings.Join(f.Allowed, ", "))
	}
	if len(f.Support) > 0 {
		fmt.Fprintln(w, "\nSUPPORT (kubexm support):")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, v := range f.Support {
			line := "    " + v.Value + "\t" + v.Status
			if v.Reason != "" {
				line += ": " + v.Reason
			}
			fmt.Fprintln(tw, line)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(f.Fields) > 0 {
		fmt.Fprintln(w, "\nFIELDS:")
		for _, c := range f.Fields {
			fmt.Fprintf(w, "  %s\t<%s>\n", c.Name, c.Type)
			if c.Description != "" {
				fmt.Fprintln(w, indentWrap(c.Description, "    ", 76))
			}
			fmt.Fprintln(w)
		}
	}
	return nil
}

// indentWrap wraps text at width columns, each line after indent.
func indentWrap(text, indent string, width int) string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, indent+line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, indent+line)
	}
	return strings.Join(lines, "\n")
}
