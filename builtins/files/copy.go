package files

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strings"

	"github.com/mensylisir/kubexm/builtins/controlfs"
	"github.com/mensylisir/kubexm/builtins/onhost"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
)

// diffLimit is the largest file copy reads back to show a --diff.
const diffLimit = 1 << 20

type copyBuiltin struct{}

func (copyBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "copy",
		Summary: "Copy a file from the control machine, or inline content, to the host.",
		Doc: "`src` is looked up in the role's `files/` directory, then the playbook's, unless it is absolute " +
			"(a path on the control machine). With `content` the text itself is written. Nothing is written when " +
			"the destination's sha256 already matches; mode and owner are still corrected.",
		Args: append([]step.Arg{
			{Name: "src", Type: step.String, Doc: "File under files/ or an absolute control-machine path."},
			{Name: "content", Type: step.String, Doc: "Text to write instead of src."},
			{Name: "dest", Type: step.String, Required: true, Doc: "Path on the host; a trailing / or an existing directory receives the file under src's base name."},
			{Name: "backup", Type: step.Bool, Default: false, Doc: "Keep the replaced file as dest.<timestamp>~."},
			{Name: "force", Type: step.Bool, Default: true, Doc: "false: leave an existing dest's content alone."},
		}, onhost.AttrArgs()...),
		Examples: []string{"copy:\n  src: containerd.toml\n  dest: /etc/containerd/config.toml\n  mode: \"0644\"",
			"copy:\n  content: \"{{ .registry_ca }}\"\n  dest: /etc/docker/certs.d/{{ .registry_host }}/ca.crt"},
	}
}

func (copyBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	dest := args.String("dest")
	o := onhost.WriteOpts{Attrs: onhost.AttrsFrom(args), Backup: args.Bool("backup"), NoForce: !args.Bool("force")}
	if args.Has("content") {
		if args.Has("src") {
			return step.Result{}, fmt.Errorf("copy: give src or content, not both")
		}
		if strings.HasSuffix(dest, "/") {
			return step.Result{}, fmt.Errorf("copy: dest %s must be a file path when content is given", dest)
		}
		return onhost.WriteContent(ctx, env, dest, []byte(args.String("content")), o)
	}
	if !args.Has("src") {
		return step.Result{}, fmt.Errorf("copy: src or content is required")
	}
	src, err := controlfs.ControlPath(env, "files", args.String("src"))
	if err != nil {
		return step.Result{}, err
	}
	sfi, err := env.Control.Stat(ctx, src, false)
	if err != nil {
		return step.Result{}, err
	}
	if !sfi.Exists {
		return step.Result{}, fmt.Errorf("copy: src %s does not exist on the control machine", src)
	}
	if sfi.IsDir {
		return step.Result{}, fmt.Errorf("copy: src %s is a directory; copy copies one file (use a loop, or unarchive for trees)", src)
	}
	if dest, err = destInDir(ctx, env, dest, filepath.Base(src)); err != nil {
		return step.Result{}, err
	}
	if sfi.Size <= diffLimit {
		content, err := readControl(ctx, env, src)
		if err != nil {
			return step.Result{}, err
		}
		return onhost.WriteContent(ctx, env, dest, content, o)
	}
	return putLarge(ctx, env, src, dest, o)
}

// putLarge sends a big file with PutFile, which streams and skips matching
// files, instead of holding it in memory for a diff.
func putLarge(ctx context.Context, env *step.Env, src, dest string, o onhost.WriteOpts) (step.Result, error) {
	want, err := env.Control.Sha256(ctx, src, false)
	if err != nil {
		return step.Result{}, err
	}
	fi, err := env.Target.Stat(ctx, dest, env.Become)
	if err != nil {
		return step.Result{}, err
	}
	data := map[string]any{"dest": dest, "checksum": want}
	have := ""
	if fi.Exists {
		if have, err = env.Target.Sha256(ctx, dest, env.Become); err != nil {
			return step.Result{}, err
		}
	}
	if have == want || (fi.Exists && o.NoForce) {
		changes, err := onhost.FixAttrs(ctx, env, dest, fi, o.Attrs)
		if err != nil {
			return step.Result{}, err
		}
		return step.Result{Changed: len(changes) > 0, Msg: strings.Join(changes, ", "), Data: data}, nil
	}
	res := step.Result{Changed: true, Data: data}
	if env.Diff {
		res.Diff = fmt.Sprintf("Binary files %s differ (large file, no diff)\n", dest)
	}
	if env.Check {
		res.Msg = "would write " + dest
		return res, nil
	}
	if o.Backup && fi.Exists {
		bak, err := onhost.BackupFile(ctx, env, dest)
		if err != nil {
			return step.Result{}, err
		}
		data["backup_file"] = bak
	}
	if _, err := env.Target.PutFile(ctx, src, dest, onhost.PutOptions(env, fi, o.Attrs)); err != nil {
		return step.Result{}, err
	}
	res.Msg = "wrote " + dest
	return res, nil
}

func readControl(ctx context.Context, env *step.Env, p string) ([]byte, error) {
	var buf bytes.Buffer
	if err := env.Control.Get(ctx, p, &buf, false); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// destInDir appends base to dest when dest names a directory (a trailing
// slash, or an existing directory on the host).
func destInDir(ctx context.Context, env *step.Env, dest, base string) (string, error) {
	if strings.HasSuffix(dest, "/") {
		return path.Join(dest, base), nil
	}
	fi, err := env.Target.Stat(ctx, dest, env.Become)
	if err != nil {
		return "", err
	}
	if fi.IsDir {
		return path.Join(dest, base), nil
	}
	return dest, nil
}

type templateBuiltin struct{}

func (templateBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "template",
		Summary: "Render a template from the role's templates/ with the task's variables and write it to the host.",
		Doc: "The template is expanded by the same engine as `{{ }}` in tasks, against every variable visible to " +
			"the task on this host. The file is rewritten only when the rendered text differs. An overlay " +
			"(`--overlay`, `site/`) may replace the whole template, or only its named blocks " +
			"(`{{ block \"name\" . }}`) with a file of `{{ define \"name\" }}` blocks " +
			"(docs/playbooks.md, Template blocks).",
		Args: append([]step.Arg{
			{Name: "src", Type: step.String, Required: true, Doc: "Template under templates/, or an absolute control-machine path."},
			{Name: "dest", Type: step.String, Required: true, Doc: "Path on the host."},
			{Name: "backup", Type: step.Bool, Default: false, Doc: "Keep the replaced file as dest.<timestamp>~."},
			{Name: "force", Type: step.Bool, Default: true, Doc: "false: leave an existing dest alone."},
		}, onhost.AttrArgs()...),
		Examples: []string{"template:\n  src: kubelet.service.tmpl\n  dest: /etc/systemd/system/kubelet.service\n  mode: \"0644\""},
	}
}

func (templateBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	src, err := controlfs.ControlPath(env, "templates", args.String("src"))
	if err != nil {
		return step.Result{}, err
	}
	text, err := readControl(ctx, env, src)
	if err != nil {
		return step.Result{}, err
	}
	if env.Render == nil {
		return step.Result{}, fmt.Errorf("template: no renderer in the environment")
	}
	render := env.Render
	if env.RenderTemplate != nil {
		// The overlays may replace named blocks of the template.
		render = func(text string, vars map[string]any) (string, error) {
			return env.RenderTemplate(args.String("src"), text, vars)
		}
	}
	out, err := render(string(text), env.Vars)
	if err != nil {
		return step.Result{}, fmt.Errorf("template %s: %w", src, err)
	}
	dest := args.String("dest")
	if dest, err = destInDir(ctx, env, dest, strings.TrimSuffix(filepath.Base(src), ".tmpl")); err != nil {
		return step.Result{}, err
	}
	o := onhost.WriteOpts{Attrs: onhost.AttrsFrom(args), Backup: args.Bool("backup"), NoForce: !args.Bool("force")}
	return onhost.WriteContent(ctx, env, dest, []byte(out), o)
}

type fetchBuiltin struct{}

func (fetchBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "fetch",
		Summary: "Copy a file from the host to the control machine.",
		// What it fetched is in the work directory: run again on resume.
		ControlProduct: true,
		Doc: "Without `flat` the file lands in `<dest>/<host>/<src path>`, so fetching the same path from many hosts " +
			"keeps them apart. A relative dest is taken under the cluster's work directory. The copy is skipped when " +
			"the sha256 already matches.",
		Args: []step.Arg{
			{Name: "src", Type: step.String, Required: true, Doc: "File on the host."},
			{Name: "dest", Type: step.String, Required: true, Doc: "Directory (or, with flat, file) on the control machine."},
			{Name: "flat", Type: step.Bool, Default: false, Doc: "Use dest as the file path (a trailing / appends src's base name)."},
			{Name: "fail_on_missing", Type: step.Bool, Default: true, Doc: "Fail when src does not exist; false reports ok and does nothing."},
			{Name: "mode", Type: step.Mode, Default: "0600", Doc: "Mode of the copy on the control machine: owner-only unless given (fetched files are often credentials); a copy of the same content with another mode gets this one."},
		},
		Examples: []string{"fetch:\n  src: /etc/kubernetes/admin.conf\n  dest: kubeconfig/admin.conf\n  flat: true"},
	}
}

func (fetchBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	src := args.String("src")
	dest := args.String("dest")
	if !filepath.IsAbs(dest) {
		if env.WorkDir == "" {
			return step.Result{}, fmt.Errorf("fetch: dest %s is relative and no work directory is set", dest)
		}
		dir := strings.HasSuffix(dest, "/")
		dest = filepath.Join(env.WorkDir, dest)
		if dir {
			dest += "/"
		}
	}
	switch {
	case !args.Bool("flat"):
		dest = filepath.Join(dest, env.Host, src)
	case strings.HasSuffix(dest, "/"):
		dest = filepath.Join(dest, path.Base(src))
	}
	have, err := env.Target.Sha256(ctx, src, env.Become)
	if err != nil {
		return step.Result{}, err
	}
	data := map[string]any{"dest": dest, "checksum": have}
	if have == "" {
		if !args.Bool("fail_on_missing") {
			return step.Result{Msg: "src " + src + " does not exist", Data: data}, nil
		}
		return step.Result{}, fmt.Errorf("%s: fetch: %s does not exist or is not a regular file", env.Target.Host(), src)
	}
	mode := args.Mode("mode")
	if mode == 0 {
		mode = 0o600
	}
	local, err := env.Control.Sha256(ctx, dest, false)
	if err != nil {
		return step.Result{}, err
	}
	if local == have {
		fi, err := env.Control.Stat(ctx, dest, false)
		if err != nil {
			return step.Result{}, err
		}
		if fi.Mode == mode {
			return step.Result{Data: data}, nil
		}
	}
	if env.Check {
		return step.Result{Changed: true, Msg: "would fetch " + src + " to " + dest, Data: data}, nil
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(env.Target.Get(ctx, src, pw, env.Become))
	}()
	err = env.Control.Put(ctx, pr, dest, transport.PutOptions{Mode: mode})
	pr.CloseWithError(err)
	if err != nil {
		return step.Result{}, fmt.Errorf("fetch %s: %w", src, err)
	}
	return step.Result{Changed: true, Msg: "fetched " + src + " to " + dest, Data: data}, nil
}
