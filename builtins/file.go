package builtins

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/mensylisir/kubexm/builtins/textdiff"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/internal/sysdirs"
)

type fileBuiltin struct{}

func (fileBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "file",
		Summary: "Make a path a directory, file, symlink, or absent, with mode and owner.",
		Doc: "`state: file` only adjusts an existing file (it fails when the file is missing; use `touch` to create " +
			"an empty one). `touch` creates the file when missing and otherwise only corrects attributes, so it is " +
			"idempotent. `directory` creates parents. `absent` removes files and whole trees, never crossing into " +
			"another file system (`unmount: true` unmounts what is mounted below first; a path that is itself a " +
			"mount point is emptied, not removed). `absent` refuses a relative path, a path with `..`, and a " +
			"system directory or a parent of one, also when the path reaches one through a symbolic link on the " +
			"host. The system directories: `" + strings.Join(sysdirs.List(), "`, `") + "`.",
		Args: append([]step.Arg{
			{Name: "path", Type: step.String, Required: true, Aliases: []string{"dest", "name"}, Doc: "Path on the host."},
			{Name: "state", Type: step.String, Choices: []string{"file", "directory", "link", "absent", "touch"}, Doc: "What path should be. Unset: what it already is (only attributes change), or file when missing."},
			{Name: "src", Type: step.String, Doc: "Target of the symlink (state: link)."},
			{Name: "recurse", Type: step.Bool, Default: false, Doc: "With state: directory, apply mode, owner and group to everything inside."},
			{Name: "force", Type: step.Bool, Default: false, Doc: "With state: link, replace an existing file (not a directory) at path."},
			{Name: "unmount", Type: step.Bool, Default: false, Doc: "With state: absent, first unmount every file system mounted below path (deepest first), e.g. a kubelet's pod volumes."},
		}, attrArgs()...),
		Examples: []string{"file:\n  path: /etc/kubernetes/pki\n  state: directory\n  mode: \"0700\"",
			"file:\n  path: /usr/local/bin/kubectl\n  src: /opt/kube/bin/kubectl\n  state: link"},
	}
}

func (fileBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	p := args.String("path")
	state := args.String("state")
	if state == "absent" {
		if err := checkRemovable(p); err != nil {
			return step.Result{}, fmt.Errorf("file: %w", err)
		}
	}
	if p == "" || p == "/" {
		return step.Result{}, fmt.Errorf("file: path %q is not allowed", p)
	}
	a := attrsFrom(args)
	host := env.Target.Host()
	fi, err := env.Target.Stat(ctx, p, env.Become)
	if err != nil {
		return step.Result{}, err
	}
	if state == "" {
		switch {
		case args.Has("src"):
			state = "link"
		case fi.IsDir:
			state = "directory"
		case fi.IsLink:
			state = "link"
			if !args.Has("src") {
				args = maps.Clone(args)
				args["src"] = fi.LinkTarget
			}
		default:
			state = "file"
		}
	}
	if err := checkChoice("state", state, "file", "directory", "link", "absent", "touch"); err != nil {
		return step.Result{}, fmt.Errorf("file: %w", err)
	}
	data := map[string]any{"path": p, "state": state}
	var changes []string
	switch state {
	case "absent":
		if !fi.Exists {
			return step.Result{Data: data}, nil
		}
		return removePath(ctx, env, p, fi.IsLink, args.Bool("unmount"), data)
	case "file":
		if !fi.Exists {
			return step.Result{}, fmt.Errorf("%s: file %s does not exist (use state: touch to create it)", host, p)
		}
		if fi.IsDir {
			return step.Result{}, fmt.Errorf("%s: %s is a directory, not a file", host, p)
		}
	case "touch":
		if fi.IsDir {
			return step.Result{}, fmt.Errorf("%s: %s is a directory, not a file", host, p)
		}
		if !fi.Exists {
			changes = append(changes, "create "+p)
			if env.Check {
				return done(env, changes, data, textdiff.Unified(p, nil, nil, false)), nil
			}
			if _, err := mustRun(ctx, env, "touch", "--", p); err != nil {
				return step.Result{}, err
			}
			if a.Mode == 0 {
				a.Mode = 0o644
			}
			if fi, err = env.Target.Stat(ctx, p, env.Become); err != nil {
				return step.Result{}, err
			}
		}
	case "directory":
		if fi.Exists && !fi.IsDir {
			return step.Result{}, fmt.Errorf("%s: %s exists and is not a directory", host, p)
		}
		if !fi.Exists {
			changes = append(changes, "create directory "+p)
			if env.Check {
				return done(env, changes, data, ""), nil
			}
			mode := a.Mode
			if mode == 0 {
				mode = 0o755
			}
			if _, err := mustRun(ctx, env, "mkdir", "-p", "-m", fmt.Sprintf("%04o", mode), "--", p); err != nil {
				return step.Result{}, err
			}
			if fi, err = env.Target.Stat(ctx, p, env.Become); err != nil {
				return step.Result{}, err
			}
		}
		if args.Bool("recurse") {
			more, err := fixTree(ctx, env, p, a)
			if err != nil {
				return step.Result{}, err
			}
			return done(env, append(changes, more...), data, ""), nil
		}
	case "link":
		src := args.String("src")
		if src == "" {
			return step.Result{}, fmt.Errorf("file: state link needs src (the link's target)")
		}
		data["src"] = src
		if fi.IsLink && fi.LinkTarget == src {
			break
		}
		if fi.Exists && !fi.IsLink {
			if fi.IsDir || !args.Bool("force") {
				return step.Result{}, fmt.Errorf("%s: %s exists and is not a symlink (force: true replaces a file)", host, p)
			}
		}
		if fi.IsLink {
			changes = append(changes, fmt.Sprintf("link %s -> %s (was -> %s)", p, src, fi.LinkTarget))
		} else {
			changes = append(changes, fmt.Sprintf("link %s -> %s", p, src))
		}
		if env.Check {
			return done(env, changes, data, ""), nil
		}
		if _, err := mustRun(ctx, env, "ln", "-sfn", "--", src, p); err != nil {
			return step.Result{}, err
		}
		if fi, err = env.Target.Stat(ctx, p, env.Become); err != nil {
			return step.Result{}, err
		}
		// chmod would follow the link; only ownership applies to it.
		a.Mode = 0
	}
	more, err := fixAttrs(ctx, env, p, fi, a)
	if err != nil {
		return step.Result{}, err
	}
	return done(env, append(changes, more...), data, ""), nil
}

// fixTree applies a to everything under dir, reporting changed only when
// find sees a path that differs.
func fixTree(ctx context.Context, env *step.Env, dir string, a attrs) ([]string, error) {
	var tests []string
	if a.Mode != 0 {
		tests = append(tests, fmt.Sprintf(`! -perm %04o`, a.Mode))
	}
	if a.Owner != "" {
		if isNumeric(a.Owner) {
			tests = append(tests, "! -uid "+a.Owner)
		} else {
			tests = append(tests, `! -user "$2"`)
		}
	}
	if a.Group != "" {
		if isNumeric(a.Group) {
			tests = append(tests, "! -gid "+a.Group)
		} else {
			tests = append(tests, `! -group "$3"`)
		}
	}
	if len(tests) == 0 {
		return nil, nil
	}
	script := `find "$1" \( ` + strings.Join(tests, " -o ") + ` \) -print | head -n 1`
	res, err := runScript(ctx, env, script, dir, a.Owner, a.Group)
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, cmdError(env, []string{"find", dir}, res)
	}
	first := strings.TrimSpace(string(res.Stdout))
	if first == "" {
		return nil, nil
	}
	if !env.Check {
		if a.Mode != 0 {
			if _, err := mustRun(ctx, env, "chmod", "-R", fmt.Sprintf("%04o", a.Mode), "--", dir); err != nil {
				return nil, err
			}
		}
		if a.Owner != "" || a.Group != "" {
			spec := a.Owner
			if a.Group != "" {
				spec += ":" + a.Group
			}
			if _, err := mustRun(ctx, env, "chown", "-R", "-h", spec, "--", dir); err != nil {
				return nil, err
			}
		}
	}
	return []string{"attributes under " + dir + " (first: " + first + ")"}, nil
}

// done builds the result of a builtin that made (or in check mode would
// make) the listed changes.
func done(env *step.Env, changes []string, data map[string]any, diff string) step.Result {
	res := step.Result{Changed: len(changes) > 0, Data: data}
	if len(changes) > 0 {
		res.Msg = strings.Join(changes, ", ")
		if env.Check {
			res.Msg = "would " + res.Msg
		}
	}
	if env.Diff {
		res.Diff = diff
	}
	return res
}
