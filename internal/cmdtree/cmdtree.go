// Package cmdtree holds the conventions kubectl, k0sctl and kk users
// expect of a whole cobra command tree, applied once after every command is
// added: an unknown noun is an error with a did-you-mean, the nouns answer
// to their singular and plural both, and the long help comes from text
// files. It also holds what a table of commands is built with: the parents
// of a path, typed flags, commands not written yet.
package cmdtree

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/internal/suggest"
)

// UnknownHint is the annotation of a group command holding what to say
// after "unknown command" besides the did-you-mean, for the mistakes its
// users are known to make (kubectl's `get pods` on kubexm get).
const UnknownHint = "kubexm/unknown-hint"

// UsageError is a command line kubexm cannot run (an unknown command);
// it exits 1, as kubectl does, never 0 as cobra's help of a group does.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }
func (e *UsageError) ExitCode() int { return 1 }

// RefuseUnknownSubcommands makes every group command under root (one
// with subcommands and nothing of its own to run) refuse an argument that
// names none of its subcommands: cobra printed a group's help and exited
// 0 for them, so `kubexm get pods` looked like it had worked. A group
// alone, or with --help, prints its help. The root is cobra's own: it
// refuses an unknown command already, and parses --version.
func RefuseUnknownSubcommands(root *cobra.Command) {
	for _, c := range root.Commands() {
		RefuseUnknownSubcommands(c)
		if !c.HasSubCommands() || c.Runnable() {
			continue
		}
		// Its help shows "kubexm get [command]" only: the RunE below is
		// there to refuse, not a use of the group alone. The template is
		// inherited by the subcommands, which keep their use line.
		if t := c.UsageTemplate(); strings.HasPrefix(t, groupUsageLine) {
			c.SetUsageTemplate(`Usage:{{if and .Runnable (not (index .Annotations "` + groupAnnotation + `"))}}
  {{.UseLine}}{{end}}` + strings.TrimPrefix(t, groupUsageLine))
		}
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[groupAnnotation] = "true"
		c.Args = cobra.ArbitraryArgs
		// The group reads its arguments itself: `kubexm get pods -o wide`
		// is about the noun, not about a flag get does not have.
		c.DisableFlagParsing = true
		c.RunE = func(cmd *cobra.Command, args []string) error {
			help := false
			for _, a := range args {
				switch {
				case a == "-h" || a == "--help":
					help = true
				case !strings.HasPrefix(a, "-"):
					return unknownSubcommand(cmd, a)
				}
			}
			if help || len(args) == 0 {
				return cmd.Help()
			}
			return &UsageError{Msg: fmt.Sprintf("%s takes a command first, not %s (%s --help lists them)", cmd.CommandPath(), args[0], cmd.CommandPath())}
		}
	}
}

// groupUsageLine is the start of cobra's usage template that shows a
// runnable command's own use line; groupAnnotation marks the groups whose
// help leaves it out.
const (
	groupUsageLine  = "Usage:{{if .Runnable}}\n  {{.UseLine}}{{end}}"
	groupAnnotation = "kubexm/group"
)

// unknownSubcommand says that group has no subcommand got, which of its
// subcommands (or their aliases) got is most likely a typo of, and what
// the group does have.
func unknownSubcommand(group *cobra.Command, got string) error {
	var names, all []string
	for _, c := range group.Commands() {
		if !c.IsAvailableCommand() {
			continue
		}
		names = append(names, c.Name())
		all = append(all, c.Name())
		all = append(all, c.Aliases...)
	}
	msg := fmt.Sprintf("unknown command %q for %q", got, group.CommandPath())
	same := func(a, b string) bool { return commandName(group, a) == commandName(group, b) }
	if s := suggest.Command(got, all, same); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", group.CommandPath()+" "+commandName(group, s))
	}
	msg += fmt.Sprintf("\n%s has: %s (%s --help)", group.CommandPath(), strings.Join(names, ", "), group.CommandPath())
	if h := group.Annotations[UnknownHint]; h != "" {
		msg += "\n" + h
	}
	return &UsageError{Msg: msg}
}

// commandName is the name of group's subcommand called name or aliased so.
func commandName(group *cobra.Command, name string) string {
	for _, c := range group.Commands() {
		if c.Name() == name || slices.Contains(c.Aliases, name) {
			return c.Name()
		}
	}
	return name
}

// AddNounAliases gives every noun command under a verb the other number
// of its name (a pair of nounNumbers) as an alias, unless a sibling has
// that name already (get job and get jobs are two commands): kubectl takes
// `get node` and `get nodes`, kk `delete node`, and kubexm takes both.
func AddNounAliases(root *cobra.Command, nounNumbers [][2]string) {
	for _, verb := range root.Commands() {
		var taken []string
		for _, c := range verb.Commands() {
			taken = append(taken, c.Name())
			taken = append(taken, c.Aliases...)
		}
		for _, c := range verb.Commands() {
			for _, pair := range nounNumbers {
				other := ""
				switch c.Name() {
				case pair[0]:
					other = pair[1]
				case pair[1]:
					other = pair[0]
				}
				if other != "" && !slices.Contains(taken, other) {
					c.Aliases = append(c.Aliases, other)
					taken = append(taken, other)
				}
			}
		}
	}
}
