package main

import (
	"context"
	"fmt"

	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/engine/step"
)

func builtinMap() map[string]step.Builtin {
	m := map[string]step.Builtin{}
	for _, b := range builtins.All() {
		m[b.Spec().Name] = b
	}
	return m
}

func load() {
	for _, p := range []string{"playbooks/create-cluster", "playbooks/delete"} {
		pb, err := engine.Load(context.Background(), p, engine.LoadOptions{Builtins: builtinMap()})
		if err != nil {
			fmt.Println(p, "ERROR:", err)
			continue
		}
		fmt.Println(p, "loaded:", len(pb.Plays), "plays")
	}
}
