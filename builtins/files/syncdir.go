package files

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/mensylisir/kubexm/builtins/onhost"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
)

type syncDirBuiltin struct{}

func (syncDirBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "sync_dir",
		Summary: "Keep a directory of the control machine and one on the host in step, file by file, by sha256.",
		// pull writes the work directory (the cluster's PKI of a new one):
		// run again on resume.
		ControlProduct: true,
		Doc: "Both trees are listed with their files' sha256 in one round trip each. `push` writes to `host_dir` " +
			"every file of `dir` that the host lacks or holds with other content (files only the host has stay, " +
			"unless `delete`). `pull` copies into `dir` every file of `host_dir` that the control machine lacks; " +
			"a file both hold with other content is listed in `differ` and replaced only with `overwrite`. A relative `dir` is taken under the " +
			"cluster's work directory. Files are written owner-only (`mode`, default 0600) in directories of " +
			"mode 0700, since such trees are usually keys; no content is shown, in a diff or anywhere else. " +
			"Results: `host_exists` (the host has host_dir), `pushed` or `pulled` (relative paths written, or " +
			"that would be in check mode), `differ` (relative paths both sides hold with other content), " +
			"`only_control` and `only_host` (relative paths one side lacks), `control_sums` and `host_sums` " +
			"(relative path -> sha256).",
		Args: []step.Arg{
			{Name: "dir", Type: step.String, Required: true, Doc: "Directory on the control machine (relative: under the work directory)."},
			{Name: "host_dir", Type: step.String, Required: true, Doc: "Absolute directory on the host."},
			{Name: "direction", Type: step.String, Required: true, Choices: []string{"push", "pull"}, Doc: "push: the control machine's files to the host; pull: the host's files the control machine lacks."},
			{Name: "delete", Type: step.Bool, Default: false, Doc: "push only: remove the host's files that dir does not hold."},
			{Name: "overwrite", Type: step.Bool, Default: false, Doc: "pull only: also replace the files dir holds with other content (the host's copy is the newer)."},
			{Name: "into_empty", Type: step.Bool, Default: false, Doc: "pull only: copy nothing unless dir holds no file yet (a tree is taken whole, never mixed into another)."},
			{Name: "mode", Type: step.Mode, Default: "0600", Doc: "Mode of the files written (on the host with push, on the control machine with pull)."},
		},
		Examples: []string{"sync_dir:\n  dir: certs\n  host_dir: /etc/kubexm/pki\n  direction: pull\nregister: pki_store"},
	}
}

// syncName is what a synced file may be called: the trees are kubexm's own
// (certificates, keys, kubeconfigs), and a name that needs quoting or escaping
// in sha256sum's output is refused rather than guessed at.
var syncName = regexp.MustCompile(`^[A-Za-z0-9._@+-]+(/[A-Za-z0-9._@+-]+)*$`)

func (syncDirBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	dir := args.String("dir")
	if !filepath.IsAbs(dir) {
		if env.WorkDir == "" {
			return step.Result{}, fmt.Errorf("sync_dir: dir %s is relative and no work directory is set", dir)
		}
		dir = filepath.Join(env.WorkDir, dir)
	}
	hostDir := args.String("host_dir")
	if !path.IsAbs(hostDir) || path.Clean(hostDir) == "/" {
		return step.Result{}, fmt.Errorf("sync_dir: host_dir %q must be an absolute directory other than /", hostDir)
	}
	hostDir = path.Clean(hostDir)
	local, _, err := listTree(ctx, env.Control, dir, false)
	if err != nil {
		return step.Result{}, fmt.Errorf("sync_dir: %s on the control machine: %w", dir, err)
	}
	remote, hostExists, err := listTree(ctx, env.Target, hostDir, env.Become)
	if err != nil {
		return step.Result{}, fmt.Errorf("sync_dir: %s on %s: %w", hostDir, env.Target.Host(), err)
	}
	cmp := compareTrees(local, remote)
	data := map[string]any{
		"host_exists": hostExists, "differ": onhost.AnyList(cmp.differ),
		"only_control": onhost.AnyList(cmp.onlyLocal), "only_host": onhost.AnyList(cmp.onlyRemote),
		"control_sums": anyMap(local), "host_sums": anyMap(remote),
		"pushed": []any{}, "pulled": []any{},
	}
	mode := args.Mode("mode")
	if mode == 0 {
		mode = 0o600
	}
	var written, removed []string
	if args.String("direction") == "push" {
		if args.Bool("overwrite") || args.Bool("into_empty") {
			return step.Result{}, fmt.Errorf("sync_dir: overwrite and into_empty go with direction pull")
		}
		written = append(append(written, cmp.onlyLocal...), cmp.differ...)
		sort.Strings(written)
		if args.Bool("delete") {
			removed = cmp.onlyRemote
		}
		data["pushed"] = onhost.AnyList(written)
		data["removed"] = onhost.AnyList(removed)
		if !env.Check {
			if err := pushFiles(ctx, env, dir, hostDir, written, mode); err != nil {
				return step.Result{}, err
			}
			if err := removeFiles(ctx, env, hostDir, removed); err != nil {
				return step.Result{}, err
			}
		}
	} else {
		if args.Bool("delete") {
			return step.Result{}, fmt.Errorf("sync_dir: delete goes with direction push")
		}
		if args.Bool("into_empty") && len(local) > 0 {
			return step.Result{Msg: dir + " holds files already: nothing pulled", Data: data}, nil
		}
		written = cmp.onlyRemote
		if args.Bool("overwrite") {
			written = append(append([]string{}, cmp.onlyRemote...), cmp.differ...)
			sort.Strings(written)
		}
		data["pulled"] = onhost.AnyList(written)
		if !env.Check {
			if err := pullFiles(ctx, env, dir, hostDir, written, mode); err != nil {
				return step.Result{}, err
			}
		}
	}
	res := step.Result{Changed: len(written)+len(removed) > 0, Data: data}
	if res.Changed {
		verb := map[bool]string{true: "would ", false: ""}[env.Check]
		res.Msg = fmt.Sprintf("%s%s %d file(s)", verb, args.String("direction"), len(written))
		if len(removed) > 0 {
			res.Msg += fmt.Sprintf(", %sremove %d", verb, len(removed))
		}
		if env.Diff {
			// Names only: these trees hold keys.
			var b strings.Builder
			for _, f := range written {
				fmt.Fprintf(&b, "+ %s\n", f)
			}
			for _, f := range removed {
				fmt.Fprintf(&b, "- %s\n", f)
			}
			res.Diff = b.String()
		}
	}
	return res, nil
}

// listTree lists the regular files below dir on t with their sha256, keyed
// by slash-separated relative path; exists is false when dir is absent. A
// name sync_dir does not take is refused: the host's answer is not trusted,
// and a pull writes where the name says.
func listTree(ctx context.Context, t transport.Transport, dir string, become bool) (map[string]string, bool, error) {
	files, exists, err := transport.SumTree(ctx, t, dir, become)
	if err != nil {
		return nil, false, err
	}
	for name := range files {
		if !syncName.MatchString(name) || escapes(name) {
			return nil, false, fmt.Errorf("%s holds a file whose name sync_dir does not take (letters, digits and ._@+- only, no . or .. component): %q", dir, name)
		}
	}
	return files, exists, nil
}

// escapes says whether a relative name climbs out of its tree or names it:
// a host's reply is not trusted, and a pull writes where the name says.
func escapes(name string) bool {
	for _, part := range strings.Split(name, "/") {
		if part == "." || part == ".." {
			return true
		}
	}
	return false
}

type treeDiff struct{ onlyLocal, onlyRemote, differ []string }

func compareTrees(local, remote map[string]string) treeDiff {
	var d treeDiff
	for name, sum := range local {
		switch r, ok := remote[name]; {
		case !ok:
			d.onlyLocal = append(d.onlyLocal, name)
		case r != sum:
			d.differ = append(d.differ, name)
		}
	}
	for name := range remote {
		if _, ok := local[name]; !ok {
			d.onlyRemote = append(d.onlyRemote, name)
		}
	}
	sort.Strings(d.onlyLocal)
	sort.Strings(d.onlyRemote)
	sort.Strings(d.differ)
	return d
}

func pushFiles(ctx context.Context, env *step.Env, dir, hostDir string, files []string, mode fs.FileMode) error {
	if len(files) == 0 {
		return nil
	}
	if err := mkdirs(ctx, env.Target, hostDir, files, env.Become); err != nil {
		return fmt.Errorf("sync_dir: %s on %s: %w", hostDir, env.Target.Host(), err)
	}
	for _, f := range files {
		if err := copyBetween(ctx, env.Control, filepath.Join(dir, filepath.FromSlash(f)), false,
			env.Target, path.Join(hostDir, f), transport.PutOptions{Mode: mode, Become: env.Become}); err != nil {
			return fmt.Errorf("sync_dir: push %s to %s: %w", f, env.Target.Host(), err)
		}
	}
	return nil
}

func pullFiles(ctx context.Context, env *step.Env, dir, hostDir string, files []string, mode fs.FileMode) error {
	if len(files) == 0 {
		return nil
	}
	if err := mkdirs(ctx, env.Control, dir, files, false); err != nil {
		return fmt.Errorf("sync_dir: %s on the control machine: %w", dir, err)
	}
	for _, f := range files {
		if err := copyBetween(ctx, env.Target, path.Join(hostDir, f), env.Become,
			env.Control, filepath.Join(dir, filepath.FromSlash(f)), transport.PutOptions{Mode: mode}); err != nil {
			return fmt.Errorf("sync_dir: pull %s from %s: %w", f, env.Target.Host(), err)
		}
	}
	return nil
}

// mkdirs makes root and the parents of files, owner-only.
func mkdirs(ctx context.Context, t transport.Transport, root string, files []string, become bool) error {
	dirs := map[string]bool{root: true}
	for _, f := range files {
		if d := path.Dir(f); d != "." {
			dirs[path.Join(root, d)] = true
		}
	}
	sorted := make([]string, 0, len(dirs))
	for d := range dirs {
		sorted = append(sorted, d)
	}
	sort.Strings(sorted)
	return transport.MkdirAll(ctx, t, sorted, 0o700, become)
}

// copyBetween streams one file from one transport to the other.
func copyBetween(ctx context.Context, from transport.Transport, src string, fromBecome bool, to transport.Transport, dst string, opts transport.PutOptions) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(from.Get(ctx, src, pw, fromBecome)) }()
	err := to.Put(ctx, pr, dst, opts)
	pr.CloseWithError(err)
	return err
}

func removeFiles(ctx context.Context, env *step.Env, hostDir string, files []string) error {
	if len(files) == 0 {
		return nil
	}
	argv := []string{"rm", "-f", "--"}
	for _, f := range files {
		argv = append(argv, path.Join(hostDir, f))
	}
	res, err := env.Target.Run(ctx, transport.Command{Argv: argv, Become: env.Become})
	if err != nil {
		return fmt.Errorf("sync_dir: remove on %s: %w", env.Target.Host(), err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("sync_dir: remove on %s failed (exit %d): %s", env.Target.Host(), res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

func anyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
