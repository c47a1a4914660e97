package cli

import (
	"io/fs"
	"strings"
	"testing"
)

// TestHelpFilesNameCommands: every help/NAME.txt is a command's, so that
// a renamed command does not lose its help to a file nobody reads.
func TestHelpFilesNameCommands(t *testing.T) {
	root := newRootCmd()
	files, err := fs.Glob(helpFiles, "help/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no help files: %v", err)
	}
	for _, f := range files {
		path := strings.Split(strings.TrimSuffix(strings.TrimPrefix(f, "help/"), ".txt"), "_")
		c, rest, err := root.Find(path)
		if err != nil || len(rest) > 0 || c.CommandPath() != "kubexm "+strings.Join(path, " ") {
			t.Errorf("%s names no command (found %q, %v)", f, c.CommandPath(), err)
			continue
		}
		if c.Long == "" && c.Example == "" {
			t.Errorf("%s: kubexm %s shows none of it", f, strings.Join(path, " "))
		}
	}
}
