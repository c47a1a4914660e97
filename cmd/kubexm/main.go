// Command kubexm creates and runs Kubernetes clusters from one cluster.yaml by
// interpreting YAML playbooks over SSH. The command tree is package cli.
package main

import "github.com/mensylisir/kubexm/cmd/kubexm/internal/cli"

func main() { cli.Main() }
