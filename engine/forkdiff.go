package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

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

// Identical says whether the fork has nothing of its own.
func (d *ForkDiff) Identical() bool {
	return len(d.Changed) == 0 && len(d.OnlyInFork) == 0 && len(d.OnlyInBuiltin) == 0
}

// DiffFork compares the forked playbook directory dir with the built-in
// playbook of the same name (the directory's name, else its name: header):
// the playbook's own files, the roles it finds in its roles/ directories
// (as roleRoots does), and the files of its site/ directories and of
// opts.Overlays.
func DiffFork(dir string, opts LoadOptions) (*ForkDiff, error) {
	if opts.BuiltinFS == nil {
		return nil, errors.New("this kubexm has no built-in playbooks to compare with")
	}
	pbDir, err := diskSource(dir)
	if err != nil {
		return nil, err
	}
	pbFile, ok := pbDir.yamlFile("playbook")
	if !pbDir.isDir() || !ok {
		return nil, fmt.Errorf("%s: not a playbook directory (a directory holding playbook.yaml, as kubexm playbook export writes under playbooks/)", dir)
	}
	bpDir, err := forkedFrom(dir, pbDir, pbFile, opts.BuiltinFS)
	if err != nil {
		return nil, err
	}
	d := &ForkDiff{Playbook: bpDir.base(), Changed: []FileDiff{}, OnlyInFork: []string{}, OnlyInBuiltin: []string{}}
	builtinRoles := source{fsys: opts.BuiltinFS, name: "roles", builtin: true}
	// The playbook's own files; roles/ and site/ below it are compared as
	// the role roots and overlays they are.
	err = walkFiles(pbDir, func(rel string, f source) error {
		if top, _, _ := strings.Cut(rel, "/"); (top == "roles" || top == "site") && strings.Contains(rel, "/") {
			return nil
		}
		return d.compare(f, bpDir.join(rel), rel)
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
func forkedFrom(dir string, pbDir, pbFile source, builtin fs.FS) (source, error) {
	builtinRoot := source{fsys: builtin, name: "playbooks", builtin: true}
	names := []string{pbDir.base()}
	if n, err := parseYAMLFile(pbFile); err == nil && n.Kind == ytree.Map {
		if s, ok := n.Get("name").Str(); ok && s != pbDir.base() {
			names = append(names, s)
		}
	}
	for _, n := range names {
		if d := builtinRoot.join(n); d.isDir() {
			return d, nil
		}
	}
	return source{}, fmt.Errorf("%s: no built-in playbook named %s%s; playbook diff compares a fork of a built-in playbook (kubexm playbook list)", dir, strings.Join(names, " or "), didYouMean(names[0], builtinPlaybooks(builtin)))
}

// compareRoles compares the roles the fork finds in its roles/
// directories with the built-in ones.
func (d *ForkDiff) compareRoles(pbDir, builtinRoles source) error {
	builtinDirs := roleDirs(builtinRoles)
	for _, root := range roleRoots(pbDir, LoadOptions{}) {
		if !root.isDir() {
			continue
		}
		err := walkFiles(root, func(rel string, f source) error {
			return d.compare(f, builtinRoles.join(rel), "roles/"+rel)
		})
		if err != nil {
			return err
		}
		// What a copied role lacks: a built-in file of a role the fork has.
		err = walkFiles(builtinRoles, func(rel string, b source) error {
			if owner := roleOf(rel, builtinDirs); owner != "" && root.join(owner).isDir() && !root.join(rel).isFile() {
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
func (d *ForkDiff) compareOverlays(pbFile source, extra []string, builtinRoles source) error {
	overlays := siteDirs(pbFile)
	for _, o := range extra {
		s, err := diskSource(o)
		if err != nil || !s.isDir() {
			return fmt.Errorf("--overlay %s: not a directory", o)
		}
		overlays = append(overlays, s)
	}
	for _, o := range overlays {
		err := walkFiles(o, func(rel string, f source) error {
			if r, ok := strings.CutPrefix(rel, "roles/"); ok {
				return d.compare(f, builtinRoles.join(r), rel)
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
func (d *ForkDiff) compare(f, b source, label string) error {
	if !b.isFile() {
		d.OnlyInFork = append(d.OnlyInFork, f.String())
		return nil
	}
	mine, err := f.read()
	if err != nil {
		return err
	}
	theirs, err := b.read()
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
func walkFiles(dir source, fn func(rel string, f source) error) error {
	return fs.WalkDir(dir.fsys, dir.name, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() || !e.Type().IsRegular() {
			return nil
		}
		return fn(strings.TrimPrefix(p, dir.name+"/"), source{fsys: dir.fsys, name: p, builtin: dir.builtin})
	})
}

// roleDirs lists the role directories under roles (those with a tasks/
// directory), by their path under it.
func roleDirs(roles source) []string {
	var out []string
	_ = fs.WalkDir(roles.fsys, roles.name, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() && e.Name() == "tasks" {
			out = append(out, strings.TrimPrefix(path.Dir(p), roles.name+"/"))
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
func parseYAMLFile(src source) (*ytree.Node, error) {
	data, err := src.read()
	if err != nil {
		return nil, err
	}
	return parseYAML(src.String(), data)
}

// sortDiff orders each list, for stable output.
func (d *ForkDiff) sortDiff() {
	slices.SortFunc(d.Changed, func(a, b FileDiff) int { return strings.Compare(a.Fork, b.Fork) })
	slices.Sort(d.OnlyInFork)
	slices.Sort(d.OnlyInBuiltin)
	d.OnlyInBuiltin = slices.Compact(d.OnlyInBuiltin)
}
