package cmdtree

import (
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Parent is the command of path's words but the last under root ("delete
// nodes": root's delete), made with its short help from shorts where it
// is not there yet, so that the commands of a table can be added by path.
func Parent(root *cobra.Command, path string, shorts map[string]string) *cobra.Command {
	p := root
	words := strings.Fields(path)
	for _, w := range words[:len(words)-1] {
		c, _, err := p.Find([]string{w})
		if err != nil || c == p {
			c = &cobra.Command{Use: w, Short: shorts[w]}
			p.AddCommand(c)
		}
		p = c
	}
	return p
}

// Flag is a flag declared by a row of a table: its name, help and, by
// the type of Value, its type and default.
type Flag struct {
	Name, Usage string
	Value       any // its type and default: false, "", 0 or []string(nil)
}

// Add adds f to fl.
func (f Flag) Add(fl *pflag.FlagSet) {
	switch d := f.Value.(type) {
	case bool:
		fl.Bool(f.Name, d, f.Usage)
	case string:
		fl.String(f.Name, d, f.Usage)
	case int:
		fl.Int(f.Name, d, f.Usage)
	case []string:
		fl.StringSlice(f.Name, d, f.Usage)
	}
}

// Given is the value of f in fl and whether it is set: not its zero
// value (a count from 1); a list is joined by commas.
func (f Flag) Given(fl *pflag.FlagSet) (any, bool) {
	switch f.Value.(type) {
	case bool:
		v, _ := fl.GetBool(f.Name)
		return v, v
	case int:
		v, _ := fl.GetInt(f.Name)
		return v, v > 0
	case []string:
		v, _ := fl.GetStringSlice(f.Name)
		return strings.Join(v, ","), len(v) > 0
	}
	v, _ := fl.GetString(f.Name)
	return v, v != ""
}

// NotYetError is a command that exists in the tree but whose work is not
// written yet: it never succeeds silently, and says what to do meanwhile.
type NotYetError struct{ What, Why, Hint string }

func (e *NotYetError) Error() string {
	return fmt.Sprintf("%s is not available yet: %s; meanwhile: %s", e.What, e.Why, e.Hint)
}

// ExitCode is 3, so that a script can tell "not written yet" from a run
// that failed (2) or hosts that were unreachable (4).
func (e *NotYetError) ExitCode() int { return 3 }

// NotYet is the command use whose work is not written yet: whatever it is
// given, it refuses with e.
func NotYet(use string, e NotYetError) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: "Not available yet: " + e.Why,
		// Whatever flags a user tries, the answer is the same message.
		DisableFlagParsing: true,
		RunE:               func(*cobra.Command, []string) error { return &e },
	}
}

// SetHelp gives every command under root its help file in dir of fsys, if
// it has one: NAME.txt, with NAME the command's path after the root's name
// joined by "_" (create_cluster). A file is the command's description,
// then, after a line "Examples:", the examples as --help prints them.
func SetHelp(root *cobra.Command, fsys fs.FS, dir string) {
	for _, c := range root.Commands() {
		SetHelp(c, fsys, dir)
		name := strings.ReplaceAll(strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" "), " ", "_")
		data, err := fs.ReadFile(fsys, path.Join(dir, name+".txt"))
		if err != nil {
			continue
		}
		long, example, _ := strings.Cut("\n"+strings.TrimRight(string(data), "\n"), "\nExamples:\n")
		c.Long, c.Example = strings.TrimSpace(long), example
	}
}
