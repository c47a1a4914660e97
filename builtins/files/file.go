package files

import (
	"context"
	"fmt"
	"maps"
	"path"
	"strings"

	"github.com/mensylisir/kubexm/builtins/onhost"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/internal/sysdirs"
	"github.com/mensylisir/kubexm/internal/textdiff"
)

// File is the file builtin: a path's state (file, directory, link, absent)
// and attributes.
type File struct{}

func (File) Spec() step.Spec {
	return step.Spec{
		Name:    "file",
		Summary: "Make a path a directory, file, symlink, or absent, with mode and owner.",
		Doc: "`state: file` only adjusts an existing file (it fails when the file is missing; use `touch` to create " +
			"an empty one). `touch` creates the file when missing and otherwise only corrects attributes, so it is " +
			"idempotent. `directory` creates parents. `absent` removes files and whole trees, never crossing into " +
			"another file system (`unmount: true` unmounts what is mounted below first; a path that is itself a " +
			"mount point is emptied, not removed). `absent` refuses a relative path, a path with `..`, and a " +
			"system directory or a parent of one, also when the path reaches one through a symbolic link on the " +
			"host. The system directories: `" + strings.Join(sysdirs.List(), "`, `") + "`. In a loop the items' paths are " +
			"read together (concurrent SFTP requests, or one command through sudo) before each item acts in order; an " +
			"item that changes a path re-reads the later items' paths that overlap it. The missing directories of a " +
			"loop (`state: directory`, no `recurse`, paths that overlap no other item's) are made in one command " +
			"and read back together.",
		Args: append([]step.Arg{
			{Name: "path", Type: step.String, Required: true, Aliases: []string{"dest", "name"}, Doc: "Path on the host."},
			{Name: "state", Type: step.String, Choices: []string{"file", "directory", "link", "absent", "touch"}, Doc: "What path should be. Unset: what it already is (only attributes change), or file when missing."},
			{Name: "src", Type: step.String, Doc: "Target of the symlink (state: link)."},
			{Name: "recurse", Type: step.Bool, Default: false, Doc: "With state: directory, apply mode, owner and group to everything inside."},
			{Name: "force", Type: step.Bool, Default: false, Doc: "With state: link, replace an existing file (not a directory) at path."},
			{Name: "unmount", Type: step.Bool, Default: false, Doc: "With state: absent, first unmount every file system mounted below path (deepest first), e.g. a kubelet's pod volumes."},
		}, onhost.AttrArgs()...),
		Examples: []string{"file:\n  path: /etc/kubernetes/pki\n  state: directory\n  mode: \"0700\"",
			"file:\n  path: /usr/local/bin/kubectl\n  src: /opt/kube/bin/kubectl\n  state: link"},
	}
}

func (File) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	if err := checkFileArgs(args); err != nil {
		return step.Result{}, err
	}
	p := args.String("path")
	fi, err := env.Target.Stat(ctx, p, env.Become)
	if err != nil {
		return step.Result{}, err
	}
	return applyFile(ctx, env, args, fi, false)
}

// checkFileArgs refuses what no host is asked about: a path that is not
// allowed at all, or not for removal.
func checkFileArgs(args step.Args) error {
	p := args.String("path")
	if args.String("state") == "absent" {
		if err := onhost.CheckRemovable(p); err != nil {
			return fmt.Errorf("file: %w", err)
		}
	}
	if p == "" || p == "/" {
		return fmt.Errorf("file: path %q is not allowed", p)
	}
	return nil
}

// RunBatch implements step.Batcher: the items' paths are read in one
// command, and each item then acts on what was read, as Run would. An item
// that changed the host makes what was read of a later item's path stale
// when one path is the other or lies under it (compared as given and with
// symbolic links resolved), or when it made or replaced a symbolic link:
// that later item reads its path again. So a re-run whose items change
// nothing takes one round trip per host.
func (b File) RunBatch(ctx context.Context, items []step.BatchItem) ([]step.Result, []error) {
	results, errs := make([]step.Result, len(items)), make([]error, len(items))
	var paths []string
	var at []int
	for i, it := range items {
		if errs[i] = checkFileArgs(it.Args); errs[i] == nil {
			paths = append(paths, it.Args.String("path"))
			at = append(at, i)
		}
	}
	var read []transport.StatEntry
	if len(at) > 0 {
		env := items[at[0]].Env
		var err error
		if read, err = transport.StatMany(ctx, env.Target, paths, env.Become); err != nil {
			// One path at a time then, as without batching; a lost
			// connection fails each item by itself.
			read = nil
			if env.Logf != nil {
				env.Logf("file: reading %d paths at once failed, one by one: %v", len(paths), err)
			}
		}
	}
	fresh := make([]bool, len(at))
	for k := range fresh {
		fresh[k] = read != nil
	}
	made := makeDirs(ctx, items, at, paths, read, fresh)
	for k, i := range at {
		it := items[i]
		if ctx.Err() != nil {
			errs[i] = ctx.Err()
			continue
		}
		var fi transport.FileInfo
		if fresh[k] {
			fi = read[k].Info
		} else if fi, errs[i] = it.Env.Target.Stat(ctx, paths[k], it.Env.Become); errs[i] != nil {
			continue
		}
		results[i], errs[i] = applyFile(ctx, it.Env, it.Args, fi, made[k])
		if it.Env.Check || (errs[i] == nil && !results[i].Changed) {
			continue
		}
		// A failed item may have changed part of what it was asked to.
		relinked := fi.IsLink || it.Args.String("state") == "link" || it.Args.Has("src")
		for j := k + 1; j < len(at); j++ {
			if !fresh[j] {
				continue
			}
			if relinked || pathsOverlap(paths[k], paths[j]) || (read != nil && realOverlap(read[k].Real, read[j].Real)) {
				fresh[j] = false
			}
		}
	}
	return results, errs
}

// makeDirs makes, in one command, the directories the items ask for that
// were read absent (state directory, not recurse, no other item's path
// overlapping theirs, as given or resolved), then reads them again in one:
// a loop making ten directories costs two round trips per host, not twenty.
// It returns, per entry of at, whether it made that item's directory; read
// then holds the new directory's metadata. When the command fails nothing
// counts as made and each item acts by itself, as without batching.
func makeDirs(ctx context.Context, items []step.BatchItem, at []int, paths []string, read []transport.StatEntry, fresh []bool) []bool {
	made := make([]bool, len(at))
	if read == nil || len(at) < 2 {
		return made
	}
	env := items[at[0]].Env
	if env.Check {
		return made
	}
	var sel []int
	for k, i := range at {
		a := items[i].Args
		if !fresh[k] || read[k].Info.Exists || a.String("state") != "directory" || a.Bool("recurse") || items[i].Env.Become != env.Become {
			continue
		}
		alone := true
		for k2 := range at {
			if k2 != k && (pathsOverlap(paths[k], paths[k2]) || realOverlap(read[k].Real, read[k2].Real)) {
				alone = false
				break
			}
		}
		if alone {
			sel = append(sel, k)
		}
	}
	if len(sel) < 2 {
		return made
	}
	const script = `while [ $# -ge 2 ]; do mkdir -p -m "$1" -- "$2" || exit; shift 2; done`
	argv := []string{"/bin/sh", "-c", script, "sh"}
	dirs := make([]string, 0, len(sel))
	for _, k := range sel {
		argv = append(argv, newDirMode(onhost.AttrsFrom(items[at[k]].Args)), paths[k])
		dirs = append(dirs, paths[k])
	}
	if _, err := onhost.MustRun(ctx, env, argv...); err != nil {
		if env.Logf != nil {
			env.Logf("file: making %d directories at once failed, one by one: %v", len(dirs), err)
		}
		return made
	}
	after, err := transport.StatMany(ctx, env.Target, dirs, env.Become)
	for j, k := range sel {
		made[k] = true
		if err != nil {
			// Made, but not read back: each item reads its own.
			fresh[k] = false
			continue
		}
		read[k] = after[j]
	}
	return made
}

// newDirMode is mkdir -m's mode for a directory made with attributes a:
// their mode, else 0755.
func newDirMode(a onhost.Attrs) string {
	if a.Mode == 0 {
		return "0755"
	}
	return fmt.Sprintf("%04o", a.Mode)
}

// pathsOverlap says whether one of two absolute paths is the other or lies
// under it.
func pathsOverlap(a, b string) bool {
	a, b = path.Clean(a), path.Clean(b)
	return a == b || strings.HasPrefix(b, strings.TrimSuffix(a, "/")+"/") || strings.HasPrefix(a, strings.TrimSuffix(b, "/")+"/")
}

// realOverlap is pathsOverlap for canonical paths, where an unknown one
// (empty) overlaps every path.
func realOverlap(a, b string) bool {
	return a == "" || b == "" || pathsOverlap(a, b)
}

// applyFile is Run once the path's metadata fi has been read; made says
// that RunBatch has just made the directory fi describes.
func applyFile(ctx context.Context, env *step.Env, args step.Args, fi transport.FileInfo, made bool) (step.Result, error) {
	p := args.String("path")
	state := args.String("state")
	a := onhost.AttrsFrom(args)
	host := env.Target.Host()
	var err error
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
	if err := onhost.CheckChoice("state", state, "file", "directory", "link", "absent", "touch"); err != nil {
		return step.Result{}, fmt.Errorf("file: %w", err)
	}
	data := map[string]any{"path": p, "state": state}
	var changes []string
	switch state {
	case "absent":
		if !fi.Exists {
			return step.Result{Data: data}, nil
		}
		return onhost.RemovePath(ctx, env, p, fi.IsLink, args.Bool("unmount"), data)
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
				return onhost.Done(env, changes, data, textdiff.Unified(p, nil, nil, false)), nil
			}
			if _, err := onhost.MustRun(ctx, env, "touch", "--", p); err != nil {
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
		if made {
			changes = append(changes, "create directory "+p)
		} else if !fi.Exists {
			changes = append(changes, "create directory "+p)
			if env.Check {
				return onhost.Done(env, changes, data, ""), nil
			}
			if _, err := onhost.MustRun(ctx, env, "mkdir", "-p", "-m", newDirMode(a), "--", p); err != nil {
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
			return onhost.Done(env, append(changes, more...), data, ""), nil
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
			return onhost.Done(env, changes, data, ""), nil
		}
		if _, err := onhost.MustRun(ctx, env, "ln", "-sfn", "--", src, p); err != nil {
			return step.Result{}, err
		}
		if fi, err = env.Target.Stat(ctx, p, env.Become); err != nil {
			return step.Result{}, err
		}
		// chmod would follow the link; only ownership applies to it.
		a.Mode = 0
	}
	more, err := onhost.FixAttrs(ctx, env, p, fi, a)
	if err != nil {
		return step.Result{}, err
	}
	return onhost.Done(env, append(changes, more...), data, ""), nil
}

// fixTree applies a to everything under dir, reporting changed only when
// find sees a path that differs.
func fixTree(ctx context.Context, env *step.Env, dir string, a onhost.Attrs) ([]string, error) {
	var tests []string
	if a.Mode != 0 {
		tests = append(tests, fmt.Sprintf(`! -perm %04o`, a.Mode))
	}
	if a.Owner != "" {
		if onhost.IsNumeric(a.Owner) {
			tests = append(tests, "! -uid "+a.Owner)
		} else {
			tests = append(tests, `! -user "$2"`)
		}
	}
	if a.Group != "" {
		if onhost.IsNumeric(a.Group) {
			tests = append(tests, "! -gid "+a.Group)
		} else {
			tests = append(tests, `! -group "$3"`)
		}
	}
	if len(tests) == 0 {
		return nil, nil
	}
	script := `find "$1" \( ` + strings.Join(tests, " -o ") + ` \) -print | head -n 1`
	res, err := onhost.RunScript(ctx, env, script, dir, a.Owner, a.Group)
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, onhost.CmdError(env, []string{"find", dir}, res)
	}
	first := strings.TrimSpace(string(res.Stdout))
	if first == "" {
		return nil, nil
	}
	if !env.Check {
		if a.Mode != 0 {
			if _, err := onhost.MustRun(ctx, env, "chmod", "-R", fmt.Sprintf("%04o", a.Mode), "--", dir); err != nil {
				return nil, err
			}
		}
		if a.Owner != "" || a.Group != "" {
			spec := a.Owner
			if a.Group != "" {
				spec += ":" + a.Group
			}
			if _, err := onhost.MustRun(ctx, env, "chown", "-R", "-h", spec, "--", dir); err != nil {
				return nil, err
			}
		}
	}
	return []string{"attributes under " + dir + " (first: " + first + ")"}, nil
}
