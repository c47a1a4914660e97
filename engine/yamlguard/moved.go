// Package yamlguard is the old path of
// github.com/mensylisir/kubexm/internal/yamlguard, which moved out of engine/
// so that schema uses it without importing the engine. Only engine/ynode.go
// still names this path: it was being changed on another branch when the
// package moved. Point it at the new path and delete this package.
package yamlguard

import guard "github.com/mensylisir/kubexm/internal/yamlguard"

type (
	Limits = guard.Limits
	Error  = guard.Error
)

func Default() Limits { return guard.Default() }

func Check(data []byte, l Limits) error { return guard.Check(data, l) }
