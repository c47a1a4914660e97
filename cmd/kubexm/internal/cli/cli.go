package cli

import (
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mensylisir/kubexm/internal/suggest"
)

// The conventions kubectl, k0sctl and kk users expect of the whole
// command tree, applied once after every command is added: an unknown
// noun is an error with a did-you-mean, and the nouns answer to their
// singular and plural both.

// unknownHint is the annotation of a group command holding what to say
// after "unknown command" besides the did-you-mean, for the mistakes its
// users are known to make (kubectl's `get pods` on kubexm get).
const unknownHint = "kubexm/unknown-hint"

// usageError is a command line kubexm cannot run (an unknown command);
// it exits 1, as kubectl does, never 0 as cobra's help of a group does.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }
func (e *usageError) ExitCode() int { return 1 }

// refuseUnknownSubcommands makes every group command under root (one
// with subcommands and nothing of its own to run) refuse an argument that
// names none of its subcommands: cobra printed a group's help and exited
// 0 for them, so `kubexm get pods` looked like it had worked. A group
// alone, or with --help, prints its help. The root is cobra's own: it
// refuses an unknown command already, and parses --version.
func refuseUnknownSubcommands(root *cobra.Command) {
	for _, c := range root.Commands() {
		refuseUnknownSubcommands(c)
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
			return &usageError{msg: fmt.Sprintf("%s takes a command first, not %s (%s --help lists them)", cmd.CommandPath(), args[0], cmd.CommandPath())}
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
	if h := group.Annotations[unknownHint]; h != "" {
		msg += "\n" + h
	}
	return &usageError{msg: msg}
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

// addNounAliases gives every noun command under a verb the other number
// of its name as an alias, unless a sibling has that name already (get
// job and get jobs are two commands): kubectl takes `get node` and `get
// nodes`, kk `delete node`, and kubexm takes both.
func addNounAliases(root *cobra.Command) {
	nounNumbers := [][2]string{{"node", "nodes"}, {"cluster", "clusters"}, {"token", "tokens"}, {"component", "components"}, {"addon", "addons"}, {"task", "tasks"}}
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

// defaultClusterFile is the cluster file every command that reads one
// takes without -f, as kubectl takes ~/.kube/config: the one in the
// directory it runs in.
const defaultClusterFile = "cluster.yaml"

// addClusterFileFlag is -f of every command reading a cluster file, so
// that they all name and default it alike.
func addClusterFileFlag(fl *pflag.FlagSet, file *string) {
	fl.StringVarP(file, "file", "f", "", "the cluster file (default ./"+defaultClusterFile+")")
}

// clusterFile is the cluster file of -f, else ./cluster.yaml when there is
// one: config validate, get nodes, the verbs and the rest find it alike.
func clusterFile(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if _, err := os.Stat(defaultClusterFile); err != nil {
		return "", fmt.Errorf("no cluster file: pass -f FILE, or run in the directory holding %s (kubexm create config -o %s writes a sample): %w",
			defaultClusterFile, defaultClusterFile, err)
	}
	return defaultClusterFile, nil
}

// addOutputFlag is -o of a command printing for people (text, or another
// name of its own such as markdown) and for programs: json and yaml, the
// same document in both.
func addOutputFlag(cmd *cobra.Command, output *string, human string) {
	cmd.Flags().StringVarP(output, "output", "o", human, human+", json or yaml")
}

// checkOutputFormat refuses an -o other than the human one, json and yaml.
func checkOutputFormat(output string, human ...string) error {
	if output == "json" || output == "yaml" || slices.Contains(human, output) {
		return nil
	}
	return &usageError{msg: fmt.Sprintf("--output must be %s, json or yaml, not %q", strings.Join(human, ", "), output)}
}

// writeStructured prints v as -o json or -o yaml. The YAML is the JSON
// converted, so both have one shape: the JSON field names.
func writeStructured(w io.Writer, format string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", format, err)
	}
	if format == "yaml" {
		if data, err = yaml.JSONToYAML(data); err != nil {
			return fmt.Errorf("encode yaml: %w", err)
		}
	} else {
		data = append(data, '\n')
	}
	_, err = w.Write(data)
	return err
}

// writeItems writes a list for programs: -o json one JSON object per
// line, -o yaml the same objects as YAML documents, each after "---".
func writeItems[T any](w io.Writer, format string, items []T) error {
	enc := json.NewEncoder(w)
	for _, it := range items {
		if format == "json" {
			if err := enc.Encode(it); err != nil {
				return err
			}
			continue
		}
		if _, err := io.WriteString(w, "---\n"); err != nil {
			return err
		}
		if err := writeStructured(w, format, it); err != nil {
			return err
		}
	}
	return nil
}

// addExtraVarsFlag is -e of every command running a playbook.
func addExtraVarsFlag(fl *pflag.FlagSet, vars *[]string) {
	fl.StringArrayVarP(vars, "extra-vars", "e", nil, "set a variable: name=value, @file.yaml or a {...} mapping (repeatable)")
}

// addRolesPathFlag is --roles-path of every command reading a cluster
// file or running a playbook: a fork's roles and its support matrix.
func addRolesPathFlag(cmd *cobra.Command, dirs *[]string) {
	cmd.Flags().StringSliceVar(dirs, "roles-path", nil, "directories searched for roles before the built-in ones; the first holding support.yaml gives the support matrix")
}

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
