// Package builtins provides kubexm's generic step types: commands, files,
// services, kernel settings, packages, artifacts, HTTP checks and control
// flow helpers. They know nothing about Kubernetes; roles put that
// knowledge in YAML. Each builtin declares its arguments in its Spec, is
// idempotent, changes nothing in check mode and shows a diff where it
// writes files.
package builtins

import (
	"fmt"

	"github.com/mensylisir/kubexm/builtins/files"
	"github.com/mensylisir/kubexm/builtins/helm"
	"github.com/mensylisir/kubexm/builtins/images"
	"github.com/mensylisir/kubexm/builtins/kube"
	"github.com/mensylisir/kubexm/builtins/network"
	"github.com/mensylisir/kubexm/builtins/pack"
	"github.com/mensylisir/kubexm/builtins/pki"
	"github.com/mensylisir/kubexm/builtins/system"
	"github.com/mensylisir/kubexm/builtins/transfer"
	"github.com/mensylisir/kubexm/engine/step"
)

// All returns every builtin, then the certificate builtins of package pki
// the helm builtin (package helm, which alone compiles the Helm SDK) and the
// k8s builtin (package kube, client-go's API verbs).
func All() []step.Builtin {
	bs := []step.Builtin{commandBuiltin{}, commandBuiltin{shell: true}}
	bs = append(bs, files.Builtins()...)
	bs = append(bs, system.Builtins()...)
	bs = append(bs, transfer.Builtins()...)
	bs = append(bs, images.Builtins()...)
	bs = append(bs, pack.Builtins()...)
	bs = append(bs, network.Builtins()...)
	bs = append(bs, setupBuiltin{}, assertBuiltin{}, failBuiltin{}, debugBuiltin{}, setFactBuiltin{}, pauseBuiltin{})
	bs = append(bs, pki.Builtins()...)
	bs = append(bs, helm.Builtins()...)
	return append(bs, kube.Builtins()...)
}

// ByName is every builtin by its name: the registry a run looks steps up
// in.
func ByName() map[string]step.Builtin {
	reg := make(map[string]step.Builtin)
	for _, b := range All() {
		reg[b.Spec().Name] = b
	}
	return reg
}

// Named is the builtins of reg called names, in that order, or All when
// names is empty (kubexm doc builtins).
func Named(reg map[string]step.Builtin, names []string) ([]step.Builtin, error) {
	if len(names) == 0 {
		return All(), nil
	}
	list := make([]step.Builtin, 0, len(names))
	for _, n := range names {
		b, ok := reg[n]
		if !ok {
			return nil, fmt.Errorf("no builtin %q: `kubexm doc builtins` lists them all", n)
		}
		list = append(list, b)
	}
	return list, nil
}
