package load

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/mensylisir/kubexm/engine/playbook"
	"github.com/mensylisir/kubexm/internal/textdiff"
	"github.com/mensylisir/kubexm/internal/ytree"
)

// ForkDiff is how a forked playbook differs from the built-in tree it was
// exported from (`kubexm playbook diff`), so a site can re-base its fork
// after an upgrade of kubexm.
type ForkDiff struct {
	// Playbook is the built-in playbook the fork is compared with.
	Playbook string `json:"playbook"`
	// Changed are the fork's files whose built-in counterpart differs.
	Changed []FileDiff `json:"changed"`
	// Same counts the fork's files equal to their built-in counterpart.
	Same int `json:"same"`
	// OnlyInFork are the fork's files without a built-in counterpart
	// (hooks, new roles, new files in a copied role).
	OnlyInFork []string `json:"only_in_fork"`
	// OnlyInBuiltin are files of the built-in roles the fork copied that the
	// copy lacks: often files a newer kubexm added.
	OnlyInBuiltin []string `json:"only_in_builtin"`
}

// FileDiff is one file of a fork that differs from the built-in one.
type FileDiff struct {
	Fork    string `json:"fork"`
	Builtin string `json:"builtin"`
	// Diff is a unified diff from the built-in file to the fork's.
	Diff string `json:"diff"`
}

// Differs is nil when the fork (the directory fork) has nothing of its
// own, else an error that says how much differs: a script or a CI job
// checking a fork fails on it.
func (d *ForkDiff) Differs(fork string) error {
	if len(d.Changed) == 0 && len(d.OnlyInFork) == 0 && len(d.OnlyInBuiltin) == 0 {
		return nil
	}
	return fmt.Errorf("%s differs from the built-in playbook %s: %d files changed, %d only in the fork, %d only in the built-in roles",
		fork, d.Playbook, len(d.Changed), len(d.OnlyInFork), len(d.OnlyInBuiltin))
}

// DiffFork compares the forked playbook directory dir with the built-in
// playbook of the same name (the directory's name, else its name: header):
// the playbook's own files, the roles it finds in its roles/ directories
// (as roleRoots does), and the files of its site/ directories and of
// opts.Overlays.
func DiffFork(dir string, opts playbook.LoadOptions) (*ForkDiff, error) {
	if opts.BuiltinFS == nil {
		return nil, errors.New("this kubexm has no built-in playbooks to compare with")
	}
	pbDir, err := playbook.DiskSource(dir)
	if err != nil {
		return nil, err
	}
	pbFile, ok := pbDir.YAMLFile("playbook")
	if !pbDir.IsDir() || !ok {
		return nil, fmt.Errorf("%s: not a playbook directory (a directory holding playbook.yaml, as kubexm playbook export writes under playbooks/)", dir)
	}
	bpDir, err := forkedFrom(dir, pbDir, pbFile, opts.BuiltinFS)
	if err != nil {
		return nil, err
	}
	d := &ForkDiff{Playbook: bpDir.Base(), Changed: []FileDiff{}, OnlyInFork: []string{}, OnlyInBuiltin: []string{}}
	builtinRoles := playbook.Source{Fsys: opts.BuiltinFS, Name: "roles", Builtin: true}
	// The playbook's own files; roles/ and site/ below it are compared as
	// the role roots and overlays they are.
	err = walkFiles(pbDir, func(rel string, f playbook.Source) error {
		if top, _, _ := strings.Cut(rel, "/"); (top == "roles" || top == "site") && strings.Contains(rel, "/") {
			return nil
		}
		return d.compare(f, bpDir.Join(rel), rel)
	})
	if err != nil {
		return nil, err
	}
	if err := d.compareRoles(pbDir, builtinRoles); err != nil {
		return nil, err
	}
	if err := d.compareOverlays(pbFile, opts.Overlays, builtinRoles); err != nil {
		return nil, err
	}
	d.sortDiff()
	return d, nil
}

// forkedFrom finds the built-in playbook a fork was copied from: the one of
// the fork directory's name, else of its name: header.
func forkedFrom(dir string, pbDir, pbFile playbook.Source, builtin fs.FS) (playbook.Source, error) {
	builtinRoot := playbook.Source{Fsys: builtin, Name: "playbooks", Builtin: true}
	names := []string{pbDir.Base()}
	if n, err := parseYAMLFile(pbFile); err == nil && n.Kind == ytree.Map {
		if s, ok := n.Get("name").Str(); ok && s != pbDir.Base() {
			names = append(names, s)
		}
	}
	for _, n := range names {
		if d := builtinRoot.Join(n); d.IsDir() {
			return d, nil
		}
	}
	return playbook.Source{}, fmt.Errorf("%s: no built-in playbook named %s%s; playbook diff compares a fork of a built-in playbook (kubexm playbook list)", dir, strings.Join(names, " or "), playbook.DidYouMean(names[0], builtinPlaybooks(builtin)))
}

// compareRoles compares the roles the fork finds in its roles/
// directories with the built-in ones.
func (d *ForkDiff) compareRoles(pbDir, builtinRoles playbook.Source) error {
	builtinDirs := roleDirs(builtinRoles)
	for _, root := range playbook.RoleRoots(pbDir, playbook.LoadOptions{}) {
		if !root.IsDir() {
			continue
		}
		err := walkFiles(root, func(rel string, f playbook.Source) error {
			return d.compare(f, builtinRoles.Join(rel), "roles/"+rel)
		})
		if err != nil {
			return err
		}
		// What a copied role lacks: a built-in file of a role the fork has.
		err = walkFiles(builtinRoles, func(rel string, b playbook.Source) error {
			if owner := roleOf(rel, builtinDirs); owner != "" && root.Join(owner).IsDir() && !root.Join(rel).IsFile() {
				d.OnlyInBuiltin = append(d.OnlyInBuiltin, b.String())
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// compareOverlays compares the files of the fork's site/ directories and
// of the --overlay directories with the built-in roles' files.
func (d *ForkDiff) compareOverlays(pbFile playbook.Source, extra []string, builtinRoles playbook.Source) error {
	overlays := siteDirs(pbFile)
	for _, o := range extra {
		s, err := playbook.DiskSource(o)
		if err != nil || !s.IsDir() {
			return fmt.Errorf("--overlay %s: not a directory", o)
		}
		overlays = append(overlays, s)
	}
	for _, o := range overlays {
		err := walkFiles(o, func(rel string, f playbook.Source) error {
			if r, ok := strings.CutPrefix(rel, "roles/"); ok {
				return d.compare(f, builtinRoles.Join(r), rel)
			}
			d.OnlyInFork = append(d.OnlyInFork, f.String())
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// compare adds fork file f to d against the built-in file b; label names
// the file in the diff's header.
func (d *ForkDiff) compare(f, b playbook.Source, label string) error {
	if !b.IsFile() {
		d.OnlyInFork = append(d.OnlyInFork, f.String())
		return nil
	}
	mine, err := f.Read()
	if err != nil {
		return err
	}
	theirs, err := b.Read()
	if err != nil {
		return err
	}
	if bytes.Equal(mine, theirs) {
		d.Same++
		return nil
	}
	d.Changed = append(d.Changed, FileDiff{Fork: f.String(), Builtin: b.String(), Diff: textdiff.Unified(label, theirs, mine, true)})
	return nil
}

// walkFiles calls fn for every regular file under dir, with its path
// relative to dir, in lexical order.
func walkFiles(dir playbook.Source, fn func(rel string, f playbook.Source) error) error {
	return fs.WalkDir(dir.Fsys, dir.Name, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() || !e.Type().IsRegular() {
			return nil
		}
		return fn(strings.TrimPrefix(p, dir.Name+"/"), playbook.Source{Fsys: dir.Fsys, Name: p, Builtin: dir.Builtin})
	})
}

// roleDirs lists the role directories under roles (those with a tasks/
// directory), by their path under it.
func roleDirs(roles playbook.Source) []string {
	var out []string
	_ = fs.WalkDir(roles.Fsys, roles.Name, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() && e.Name() == "tasks" {
			out = append(out, strings.TrimPrefix(path.Dir(p), roles.Name+"/"))
			return fs.SkipDir
		}
		return nil
	})
	return out
}

// roleOf returns the innermost role directory holding rel, or "".
func roleOf(rel string, dirs []string) string {
	best := ""
	for _, r := range dirs {
		if strings.HasPrefix(rel, r+"/") && len(r) > len(best) {
			best = r
		}
	}
	return best
}

// parseYAMLFile reads and parses one file, outside any loader.
func parseYAMLFile(src playbook.Source) (*ytree.Node, error) {
	data, err := src.Read()
	if err != nil {
		return nil, err
	}
	return playbook.ParseYAML(src.String(), data)
}

// sortDiff orders each list, for stable output.
func (d *ForkDiff) sortDiff() {
	slices.SortFunc(d.Changed, func(a, b FileDiff) int { return strings.Compare(a.Fork, b.Fork) })
	slices.Sort(d.OnlyInFork)
	slices.Sort(d.OnlyInBuiltin)
	d.OnlyInBuiltin = slices.Compact(d.OnlyInBuiltin)
}

// Write prints the differences as diff -ru does, and their counts.
func (d *ForkDiff) Write(w io.Writer) error {
	for _, c := range d.Changed {
		fmt.Fprintf(w, "diff %s %s\n%s", c.Builtin, c.Fork, c.Diff)
	}
	for _, f := range d.OnlyInFork {
		fmt.Fprintf(w, "Only in the fork: %s\n", f)
	}
	for _, f := range d.OnlyInBuiltin {
		fmt.Fprintf(w, "Only in the built-in: %s\n", f)
	}
	_, err := fmt.Fprintf(w, "%d files changed, %d unchanged, %d only in the fork, %d only in the built-in (playbook %s)\n",
		len(d.Changed), d.Same, len(d.OnlyInFork), len(d.OnlyInBuiltin), d.Playbook)
	return err
}
