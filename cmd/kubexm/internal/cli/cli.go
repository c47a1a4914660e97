package cli

import (
	"embed"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

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
// (cmdtree.SetHelp): they read as the CLI reference, and the Go code keeps
// only the flags and what the command does.
//
//go:embed help/*.txt
var helpFiles embed.FS
