package transfer

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/mensylisir/kubexm/builtins/controlfs"
	"github.com/mensylisir/kubexm/builtins/onhost"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
)

type unarchiveBuiltin struct{}

func (unarchiveBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "unarchive",
		Summary: "Extract a tar (.tar.gz, .tgz, .tar.xz, .tar) or .zip archive on the host.",
		Doc: "The archive comes from the control machine (uploaded first; a relative src is looked up in the work " +
			"directory, then the role's files/) or, with `remote_src`, is already on the host. Extraction uses `tar` " +
			"or `unzip` on the host. It is skipped when `creates` exists, or when the stamp file " +
			"`<dest>/.kubexm-unarchive-<archive name>` records the same archive sha256 and options, so a second run " +
			"changes nothing and a new archive version is extracted again.",
		Args: []step.Arg{
			{Name: "src", Type: step.String, Required: true, Doc: "Archive path on the control machine (or the host with remote_src)."},
			{Name: "dest", Type: step.String, Required: true, Doc: "Directory on the host to extract into; created when missing."},
			{Name: "remote_src", Type: step.Bool, Default: false, Doc: "src is a path on the host."},
			{Name: "creates", Type: step.String, Doc: "Skip when this path exists on the host."},
			{Name: "strip_components", Type: step.Int, Default: 0, Doc: "Drop this many leading path components (tar archives only)."},
			{Name: "include", Type: step.List, Doc: "Extract only these members (paths as stored in the archive)."},
		},
		Examples: []string{"unarchive:\n  src: etcd/{{ .etcd_version }}/{{ .arch }}/etcd-v{{ .etcd_version }}-linux-{{ .arch }}.tar.gz\n  dest: /usr/local/bin\n  strip_components: 1\n  include:\n    - \"etcd-v{{ .etcd_version }}-linux-{{ .arch }}/etcd\"\n    - \"etcd-v{{ .etcd_version }}-linux-{{ .arch }}/etcdctl\""},
	}
}

func archiveKind(name string) (string, error) {
	n := strings.ToLower(name)
	switch {
	case strings.HasSuffix(n, ".zip"):
		return "zip", nil
	case strings.HasSuffix(n, ".tar.gz"), strings.HasSuffix(n, ".tgz"), strings.HasSuffix(n, ".tar.xz"),
		strings.HasSuffix(n, ".txz"), strings.HasSuffix(n, ".tar.bz2"), strings.HasSuffix(n, ".tar"):
		return "tar", nil
	}
	return "", fmt.Errorf("unarchive: %s: unknown archive type (want .tar.gz, .tgz, .tar.xz, .tar.bz2, .tar or .zip)", name)
}

func (unarchiveBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	src, dest := args.String("src"), args.String("dest")
	kind, err := archiveKind(src)
	if err != nil {
		return step.Result{}, err
	}
	strip := args.Int("strip_components")
	if strip < 0 {
		return step.Result{}, fmt.Errorf("unarchive: strip_components must not be negative")
	}
	if strip > 0 && kind == "zip" {
		return step.Result{}, fmt.Errorf("unarchive: strip_components is supported for tar archives only (%s is a zip)", src)
	}
	include := args.Strings("include")
	data := map[string]any{"dest": dest, "src": src}
	if c := args.String("creates"); c != "" {
		fi, err := env.Target.Stat(ctx, c, env.Become)
		if err != nil {
			return step.Result{}, err
		}
		if fi.Exists {
			return step.Result{Msg: c + " exists, skipped", Data: data}, nil
		}
	}
	remote := args.Bool("remote_src")
	var sum string
	if remote {
		sum, err = env.Target.Sha256(ctx, src, env.Become)
	} else {
		var p string
		if p, err = archivePath(ctx, env, src); err == nil {
			src = p
			sum, err = env.Control.Sha256(ctx, src, false)
		}
	}
	if env.Check && (err != nil || sum == "") {
		return notYet(env, "extract "+src+" into "+dest, err, data), nil
	}
	if err != nil {
		return step.Result{}, err
	}
	if sum == "" {
		where := "the control machine"
		if remote {
			where = env.Target.Host()
		}
		return step.Result{}, fmt.Errorf("unarchive: %s does not exist on %s", src, where)
	}
	data["checksum"] = sum
	stamp := path.Join(dest, ".kubexm-unarchive-"+path.Base(filepath.ToSlash(src)))
	stampText := fmt.Sprintf("sha256=%s strip_components=%d include=%s\n", sum, strip, strings.Join(include, ","))
	old, _, err := onhost.ReadFile(ctx, env, stamp)
	if err != nil {
		return step.Result{}, err
	}
	if string(old) == stampText {
		return step.Result{Data: data}, nil
	}
	if env.Check {
		return step.Result{Changed: true, Msg: "would extract " + src + " into " + dest, Data: data}, nil
	}
	archive := src
	if !remote {
		archive = "/tmp/.kubexm-" + sum[:16] + "-" + filepath.Base(src)
		if _, err := env.Target.PutFile(ctx, src, archive, transport.PutOptions{Mode: 0o600, Become: env.Become}); err != nil {
			return step.Result{}, err
		}
		defer func() {
			// Best effort: a leftover in /tmp is harmless and reused next time.
			_, _ = onhost.Run(context.WithoutCancel(ctx), env, "rm", "-f", "--", archive)
		}()
	}
	if _, err := onhost.MustRun(ctx, env, "mkdir", "-p", "--", dest); err != nil {
		return step.Result{}, err
	}
	var argv []string
	if kind == "zip" {
		argv = append([]string{"unzip", "-o", "-q", archive}, include...)
		argv = append(argv, "-d", dest)
	} else {
		argv = []string{"tar", "-xf", archive, "-C", dest, "--no-same-owner"}
		if strip > 0 {
			argv = append(argv, fmt.Sprintf("--strip-components=%d", strip))
		}
		argv = append(argv, include...)
	}
	if _, err := onhost.MustRun(ctx, env, argv...); err != nil {
		return step.Result{}, err
	}
	if err := env.Target.Put(ctx, strings.NewReader(stampText), stamp, transport.PutOptions{Mode: 0o644, Become: env.Become}); err != nil {
		return step.Result{}, err
	}
	return step.Result{Changed: true, Msg: "extracted " + src + " into " + dest, Data: data}, nil
}

// notYet is the check-mode answer when an input is missing: in a real run
// an earlier task (download, a template) would have produced it.
func notYet(env *step.Env, action string, err error, data map[string]any) step.Result {
	why := "its source does not exist yet"
	if err != nil {
		why = err.Error()
	}
	return step.Result{Changed: true, Msg: "would " + action + " (" + why + "; an earlier task is expected to provide it)", Data: data}
}

// archivePath resolves a control-machine archive: absolute, else under the
// work directory (where download puts artifacts), else the role's files/.
func archivePath(ctx context.Context, env *step.Env, src string) (string, error) {
	if filepath.IsAbs(src) {
		return src, nil
	}
	if env.WorkDir != "" {
		p := filepath.Join(env.WorkDir, src)
		fi, err := env.Control.Stat(ctx, p, false)
		if err != nil {
			return "", err
		}
		if fi.Exists {
			return p, nil
		}
	}
	return controlfs.ControlPath(env, "files", src)
}
