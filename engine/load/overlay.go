package load

import (
	"fmt"
	"github.com/mensylisir/kubexm/engine/eval"
	"github.com/mensylisir/kubexm/engine/playbook"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// Overlays: a directory whose roles/<role>/templates/<file> or
// roles/<role>/files/<file> replaces that one file of a role without a copy
// of the role. The directories searched, highest precedence first, are the
// --overlay directories from the last given to the first (a later layer is
// the more specific one, as a later -e wins), then the site/ directories
// beside the playbook (siteDirs).

// overlayKinds are the role subdirectories an overlay may replace files in.
var overlayKinds = []string{"templates", "files"}

// siteDirs lists the site/ directories a playbook on disk brings along: one
// in its own directory and, for a fork laid out as DIR/playbooks/NAME (what
// `kubexm playbook export` writes), DIR/site, as roleRoots finds DIR/roles.
// Only a playbook directory (NAME/playbook.yaml) has them: a single-file
// playbook's directory is often the working directory, whose site/ may be
// anything (an export, say).
func siteDirs(pbFile playbook.Source) []playbook.Source {
	if !ownsDir(pbFile) {
		return nil
	}
	pbDir := pbFile.Dir()
	var out []playbook.Source
	if d := pbDir.Join("site"); d.IsDir() {
		out = append(out, d)
	}
	if pbDir.Dir().Base() == "playbooks" {
		if d := pbDir.Dir().Dir().Join("site"); d.IsDir() {
			out = append(out, d)
		}
	}
	return out
}

// ownsDir says whether the playbook file is a playbook directory's
// playbook.yaml on disk, whose directory holds only what belongs to it.
func ownsDir(pbFile playbook.Source) bool {
	b := pbFile.Base()
	return !pbFile.Builtin && pbFile.Fsys != nil && (b == "playbook.yaml" || b == "playbook.yml")
}

// overlayDirs returns the overlay directories, highest precedence first:
// the --overlay ones last to first, then the site/ directories.
func (ld *loader) overlayDirs(pbFile playbook.Source) []playbook.Source {
	var out []playbook.Source
	for _, d := range slices.Backward(ld.opts.Overlays) {
		s, err := playbook.DiskSource(d)
		if err != nil || !s.IsDir() {
			ld.errs = append(ld.errs, fmt.Errorf("--overlay %s: not a directory", d))
			continue
		}
		out = append(out, s)
	}
	return append(out, siteDirs(pbFile)...)
}

// checkOverlays makes sure every file under an overlay's roles/ replaces a
// file the role really has (a typo would otherwise be ignored silently),
// and adds each file to the playbook hash, so that --resume sees a changed
// overlay as it sees a changed role.
func (ld *loader) checkOverlays(dirs []playbook.Source) {
	for _, o := range dirs {
		roles := o.Join("roles")
		if !roles.IsDir() {
			continue
		}
		_ = fs.WalkDir(roles.Fsys, roles.Name, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				ld.errs = append(ld.errs, fmt.Errorf("overlay %s: %w", o, err))
				return nil
			}
			if d.IsDir() {
				return nil
			}
			rel := strings.TrimPrefix(p, roles.Name+"/")
			ld.checkOverlayFile(o, playbook.Source{Fsys: roles.Fsys, Name: p}, rel)
			return nil
		})
	}
}

// checkOverlayFile checks one overlay file, rel being its path under the
// overlay's roles/ (e.g. containerd/templates/config.toml.tmpl).
func (ld *loader) checkOverlayFile(o, f playbook.Source, rel string) {
	parts := strings.Split(rel, "/")
	k := slices.IndexFunc(parts, func(s string) bool { return slices.Contains(overlayKinds, s) })
	if k < 1 || k == len(parts)-1 {
		ld.errs = append(ld.errs, fmt.Errorf("overlay %s: an overlay replaces single files as roles/<role>/templates/<file> or roles/<role>/files/<file>; to change a role's tasks, defaults or handlers, copy the role into the fork's roles/ (kubexm playbook export)", f))
		return
	}
	role, kind, name := path.Join(parts[:k]...), parts[k], path.Join(parts[k+1:]...)
	dir, ok := ld.findRole(role)
	if !ok {
		ld.errs = append(ld.errs, fmt.Errorf("overlay %s: there is no role %q to overlay%s", f, role, playbook.DidYouMean(role, ld.roleNames())))
		return
	}
	if !dir.Join(kind).Join(name).IsFile() {
		real := roleFiles(dir.Join(kind))
		list := "it has none"
		if len(real) > 0 {
			list = "it has " + strings.Join(real, ", ")
		}
		ld.errs = append(ld.errs, fmt.Errorf("overlay %s shadows nothing: role %s (%s) has no %s/%s%s; %s", f, role, dir, kind, name, fileHint(name, real), list))
		return
	}
	data, err := f.Read()
	if err != nil {
		ld.errs = append(ld.errs, fmt.Errorf("overlay %s: %w", f, err))
		return
	}
	if kind == "templates" {
		ld.checkOverlayBlocks(f, string(data), role, dir.Join(kind).Join(name))
	}
	ld.hash.Write([]byte("overlay:" + ld.stable(o) + ":" + rel))
	ld.hash.Write([]byte{0})
	ld.hash.Write(data)
}

// checkOverlayBlocks checks an overlay template that holds only
// {{ define "name" }} blocks: each must name a block of the role's template
// it replaces, else the replacement would be silently ignored.
func (ld *loader) checkOverlayBlocks(f playbook.Source, text, role string, tmpl playbook.Source) {
	blocks, only, err := eval.TemplateBlocks(text)
	if err != nil || !only {
		return // a whole template, checked where it is rendered
	}
	base, err := tmpl.Read()
	if err != nil {
		ld.errs = append(ld.errs, fmt.Errorf("overlay %s: %w", f, err))
		return
	}
	known, _, err := eval.TemplateBlocks(string(base))
	if err != nil {
		ld.errs = append(ld.errs, fmt.Errorf("overlay %s: role %s's %s: %w", f, role, tmpl, err))
		return
	}
	names := make([]string, len(known))
	for i, k := range known {
		names[i] = k.Name
	}
	for _, b := range blocks {
		if !slices.Contains(names, b.Name) {
			ld.errs = append(ld.errs, fmt.Errorf("overlay %s:%d: block %q is not in role %s's template %s%s; %s",
				f, b.Line, b.Name, role, tmpl, playbook.DidYouMean(b.Name, names), eval.BlockNames(known)))
		}
	}
}

// fileHint is didYouMean for file names: a typo in an extension
// (config.tml for config.toml.tmpl) is too many edits for a name, so a file
// of the same stem is suggested too.
func fileHint(name string, files []string) string {
	if h := playbook.DidYouMean(name, files); h != "" {
		return h
	}
	stem := func(s string) string { b, _, _ := strings.Cut(s, "."); return b }
	for _, f := range files {
		if path.Dir(f) == path.Dir(name) && stem(path.Base(f)) == stem(path.Base(name)) {
			return fmt.Sprintf(" (did you mean %q?)", f)
		}
	}
	return ""
}

// roleFiles lists the files under dir, relative to it.
func roleFiles(dir playbook.Source) []string {
	if !dir.IsDir() {
		return nil
	}
	var out []string
	_ = fs.WalkDir(dir.Fsys, dir.Name, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, strings.TrimPrefix(p, dir.Name+"/"))
		}
		return nil
	})
	return out
}

// roleNames lists the roles of every role root (a directory with tasks/),
// by their path under the root, for suggestions.
func (ld *loader) roleNames() []string {
	set := map[string]bool{}
	for _, root := range playbook.RoleRoots(ld.pbDir, ld.opts) {
		if root.IsDir() {
			for _, r := range roleDirs(root) {
				set[r] = true
			}
		}
	}
	return playbook.KeysOf(set)
}
