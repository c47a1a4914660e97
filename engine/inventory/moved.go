// Package inventory is the old path of github.com/mensylisir/kubexm/inventory,
// which moved out of engine/ so that schema builds an inventory without
// importing the engine. Only engine/run.go and cmd/kubexm/play.go still
// name this path: they were being changed on another branch when the
// package moved. Point them at the new path and delete this package.
package inventory

import inv "github.com/mensylisir/kubexm/inventory"

type (
	Inventory = inv.Inventory
	Host      = inv.Host
)

const Localhost = inv.Localhost
