package builtins

import (
	"context"
	"fmt"
	"strings"

	"github.com/mensylisir/kubexm/builtins/transfer"
	"github.com/mensylisir/kubexm/engine/step"
)

// Offline wraps the builtins of reg that reach the network so that a run
// with --offline-bundle fails instead of fetching: every file must come
// from the bundle. reg itself is left as it is.
func Offline(reg map[string]step.Builtin) map[string]step.Builtin {
	out := make(map[string]step.Builtin, len(reg))
	for n, b := range reg {
		out[n] = b
	}
	if b, ok := reg["download"]; ok {
		out["download"] = offlineGuard{Builtin: b, refuse: func(args step.Args) string {
			urls := args.Strings("urls")
			if args.Has("url") {
				urls = append([]string{args.String("url")}, urls...)
			}
			for _, c := range args.Strings("checksums") {
				if transfer.IsHTTPURL(c) {
					urls = append(urls, c)
				}
			}
			if len(transfer.NonEmpty(urls)) == 0 {
				return ""
			}
			return "download from " + strings.Join(transfer.NonEmpty(urls), ", ") + " to " + args.String("dest")
		}}
	}
	if b, ok := reg["image_save"]; ok {
		out["image_save"] = offlineGuard{Builtin: b, refuse: func(args step.Args) string {
			return "pull " + args.String("ref") + " from its registry"
		}}
	}
	return out
}

type offlineGuard struct {
	step.Builtin
	refuse func(step.Args) string // "" allows the call
}

func (g offlineGuard) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	if what := g.refuse(args); what != "" {
		return step.Result{}, fmt.Errorf("--offline-bundle: refusing to %s: an offline run fetches nothing from the network, and the bundle lacks this file "+
			"(export a bundle for this configuration with kubexm artifact export, or fetch it with the download role, which reads the bundle)", what)
	}
	return g.Builtin.Run(ctx, env, args)
}
