package cli

import (
	"embed"
	"strings"

	"github.com/spf13/cobra"
)

// The long help of a command and its examples are text files, help/NAME.txt
// with NAME the command's path after kubexm joined by "_" (create_cluster):
// they read as the CLI reference, and the Go code keeps only the flags and
// what the command does. A file is the command's description, then, after
// a line "Examples:", the examples as --help prints them.
//
//go:embed help/*.txt
var helpFiles embed.FS

// setHelp gives every command under root its help file, if it has one.
func setHelp(root *cobra.Command) {
	for _, c := range root.Commands() {
		setHelp(c)
		data, err := helpFiles.ReadFile("help/" + strings.ReplaceAll(strings.TrimPrefix(c.CommandPath(), "kubexm "), " ", "_") + ".txt")
		if err != nil {
			continue
		}
		long, example, _ := strings.Cut("\n"+strings.TrimRight(string(data), "\n"), "\nExamples:\n")
		c.Long, c.Example = strings.TrimSpace(long), example
	}
}
