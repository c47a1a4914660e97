package builtins

import (
	"context"
	"fmt"

	"github.com/mensylisir/kubexm/engine/facts"
	"github.com/mensylisir/kubexm/engine/step"
)

type setupBuiltin struct{}

func (setupBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "setup",
		Summary: "Gather facts about the host (OS, architecture, CPUs, memory, addresses, init system) into the variable `facts`.",
		Doc: "One command on the host collects everything; the result is set as the host variable `facts` for the " +
			"rest of the run. It reads only, so it also runs in check mode.",
		Examples: []string{"setup: {}"},
	}
}

func (setupBuiltin) Run(ctx context.Context, env *step.Env, _ step.Args) (step.Result, error) {
	f, err := facts.Gather(ctx, env.Target)
	if err != nil {
		return step.Result{}, fmt.Errorf("setup: %w", err)
	}
	return step.Result{Facts: map[string]any{"facts": f}, Data: map[string]any{"facts": f}}, nil
}
