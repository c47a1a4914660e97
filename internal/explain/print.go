package explain

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Write prints the field as kubectl explain does.
func (f *Field) Write(w io.Writer) error {
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
