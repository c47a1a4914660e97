package files

import (
	"context"
	"encoding/base64"
	"fmt"

	"github.com/mensylisir/kubexm/builtins/onhost"
	"github.com/mensylisir/kubexm/engine/step"
)

// slurpBuiltin reads a file into the registered result, so that a task can
// carry it on (into a Secret, a template) without a command whose output is
// the file: Ansible's slurp. The content is base64, as Kubernetes Secret
// data wants it and as a binary file survives it.
type slurpBuiltin struct{}

func (slurpBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "slurp",
		Summary: "Read a file on the host (with delegate_to: localhost, on the control machine) into the registered result, base64-encoded.",
		Doc: "Registers `content` (the file, base64), `size` (bytes), `sha256` and `exists`. It changes nothing and " +
			"runs in check mode too. A file holding a secret (a private key) belongs in a task with `no_log: true`: " +
			"its result then reaches no output and no journal. `b64dec` decodes the content in a template.",
		Args: []step.Arg{
			{Name: "src", Type: step.String, Required: true, Doc: "The file to read (absolute path)."},
			{Name: "missing_ok", Type: step.Bool, Default: false, Doc: "A missing src registers exists false and an empty content instead of failing."},
		},
		Examples: []string{"slurp:\n  src: /etc/kubernetes/pki/ca.crt\nregister: ca", "slurp:\n  src: \"{{ .ssh_key_file }}\"\ndelegate_to: localhost\nbecome: false\nno_log: true\nregister: key"},
	}
}

func (slurpBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	src := args.String("src")
	data, exists, err := onhost.ReadFile(ctx, env, src)
	if err != nil {
		return step.Result{}, fmt.Errorf("slurp: %w", err)
	}
	if !exists {
		if !args.Bool("missing_ok") {
			return step.Result{}, onhost.Missing("set missing_ok: true when the file may be absent", "%s: slurp: %s does not exist", env.Target.Host(), src)
		}
		return step.Result{Msg: src + " does not exist", Data: map[string]any{"content": "", "encoding": "base64", "size": 0, "sha256": "", "exists": false}}, nil
	}
	return step.Result{Data: map[string]any{
		"content":  base64.StdEncoding.EncodeToString(data),
		"encoding": "base64",
		"size":     len(data),
		"sha256":   onhost.SHA256Hex(data),
		"exists":   true,
	}}, nil
}
