package builtins

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
)

type distributeBuiltin struct{}

func (distributeBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "distribute",
		Summary: "Send one control-machine file (a binary, an image tarball) to the host, skipped where the checksum matches.",
		Doc: "Meant for large artifacts: the file is streamed without being read into memory and without a diff. " +
			"The engine runs the task on all hosts in parallel. A relative src is looked up in the work directory " +
			"(where `download` puts artifacts), then in the role's files/.",
		Args: append([]step.Arg{
			{Name: "src", Type: step.String, Required: true, Doc: "File on the control machine."},
			{Name: "dest", Type: step.String, Required: true, Doc: "Path on the host; a trailing / appends src's base name."},
		}, attrArgs()...),
		Examples: []string{"distribute:\n  src: kubernetes/{{ .kube_version }}/{{ .arch }}/kubelet\n  dest: /usr/local/bin/kubelet\n  mode: \"0755\""},
	}
}

func (distributeBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	src, err := archivePath(ctx, env, args.String("src"))
	want := ""
	if err == nil {
		want, err = env.Control.Sha256(ctx, src, false)
	}
	if env.Check && (err != nil || want == "") {
		return notYet(env, "send "+args.String("src")+" to "+args.String("dest"), err, map[string]any{"dest": args.String("dest")}), nil
	}
	if err != nil {
		return step.Result{}, fmt.Errorf("distribute: %w", err)
	}
	if want == "" {
		return step.Result{}, fmt.Errorf("distribute: src %s does not exist on the control machine", src)
	}
	dest := args.String("dest")
	if strings.HasSuffix(dest, "/") {
		dest = path.Join(dest, filepath.Base(src))
	}
	data := map[string]any{"dest": dest, "checksum": want}
	a := attrsFrom(args)
	if env.Check {
		have, err := env.Target.Sha256(ctx, dest, env.Become)
		if err != nil {
			return step.Result{}, err
		}
		if have != want {
			return step.Result{Changed: true, Msg: "would send " + src + " to " + dest, Data: data}, nil
		}
		fi, err := env.Target.Stat(ctx, dest, env.Become)
		if err != nil {
			return step.Result{}, err
		}
		changes, err := fixAttrs(ctx, env, dest, fi, a)
		if err != nil {
			return step.Result{}, err
		}
		return done(env, changes, data, ""), nil
	}
	mode := a.Mode
	if mode == 0 {
		mode = 0o644
	}
	changed, err := env.Target.PutFile(ctx, src, dest, transport.PutOptions{Mode: mode, Owner: a.Owner, Group: a.Group, Become: env.Become})
	if err != nil {
		return step.Result{}, err
	}
	res := step.Result{Changed: changed, Data: data}
	if changed {
		res.Msg = "sent " + src + " to " + dest
	}
	return res, nil
}
