// Package builtins provides kubexm's generic step types: commands, files,
// services, kernel settings, packages, artifacts, HTTP checks and control
// flow helpers. They know nothing about Kubernetes; roles put that
// knowledge in YAML. Each builtin declares its arguments in its Spec, is
// idempotent, changes nothing in check mode and shows a diff where it
// writes files.
package builtins

import (
	"context"

	"github.com/mensylisir/kubexm/builtins/helm"
	"github.com/mensylisir/kubexm/builtins/kube"
	"github.com/mensylisir/kubexm/builtins/pki"
	"github.com/mensylisir/kubexm/engine/step"
)

// All returns every builtin, then the certificate builtins of package pki
// the helm builtin (package helm, which alone compiles the Helm SDK) and the
// k8s builtin (package kube, client-go's API verbs).
func All() []step.Builtin {
	bs := []step.Builtin{
		commandBuiltin{}, commandBuiltin{shell: true},
		copyBuiltin{}, templateBuiltin{}, fetchBuiltin{},
		fileBuiltin{}, lineinfileBuiltin{}, blockinfileBuiltin{},
		systemdBuiltin{}, sysctlBuiltin{}, modprobeBuiltin{}, hostnameBuiltin{}, timezoneBuiltin{},
		userBuiltin{}, groupBuiltin{},
		packageBuiltin{},
		newDownload(), unarchiveBuiltin{}, newDistribute(), newImageSave(), newControllerImage(), imagePushBuiltin{}, registryCheckBuiltin{}, htpasswdBuiltin{},
		packBuiltin{}, unpackBuiltin{}, syncDirBuiltin{},
		waitForBuiltin{}, uriBuiltin{}, dnsQueryBuiltin{},
		setupBuiltin{},
		assertBuiltin{}, failBuiltin{}, debugBuiltin{}, setFactBuiltin{}, pauseBuiltin{},
	}
	bs = append(bs, pki.Builtins()...)
	bs = append(bs, helm.Builtins()...)
	return append(bs, kube.Builtins()...)
}

// runBuiltin runs b as the engine would: with its Spec's defaults for what
// args leave out.
func runBuiltin(ctx context.Context, env *step.Env, b step.Builtin, args step.Args) (step.Result, error) {
	return b.Run(ctx, env, b.Spec().WithDefaults(args))
}
