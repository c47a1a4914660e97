// Package load turns playbook YAML into the checked model
// (engine/playbook): plays, the keyword tables, tasks and their arguments
// against each builtin's spec, includes, roles, hooks, overlays, and the
// diff of a fork against the built-ins. It never runs anything; a dynamic
// include gets from it the function that loads the include's file at run
// time (playbook.Include.Load).
package load

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/mensylisir/kubexm/engine/eval"
	"github.com/mensylisir/kubexm/engine/playbook"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/internal/ytree"
)

// maxErrors bounds how many load errors one report lists.
const maxErrors = 20

// maxIncludeDepth stops import cycles.
const maxIncludeDepth = 30

type loader struct {
	opts  playbook.LoadOptions
	ev    *eval.Evaluator
	hash  hash.Hash
	seen  map[string]bool // files already hashed
	errs  []error
	stack []string // files being imported, for cycle detection
	pbDir playbook.Source
	// handlerRoles records which roles already contributed handlers to the
	// current play.
	handlerRoles map[string]bool
	// seenRoles holds the role references of the current play, for
	// deduplication.
	seenRoles map[string]bool
	play      *playbook.Play
	// hookTags are added to the tags of the plays being loaded from a hook:
	// the tags of the phase it hooks.
	hookTags []string
	// roleDirs are the directories of the roles loaded, by reference.
	roleDirs map[string]playbook.Source
}

// Load finds the playbook ref (a directory holding playbook.yaml, a YAML file,
// or the name of a built-in playbook), parses and checks all of it, and
// returns it ready to run. Every problem is reported with file:line:col
// before anything runs.
func Load(ctx context.Context, ref string, opts playbook.LoadOptions) (*playbook.Playbook, error) {
	src, err := resolvePlaybook(ref, opts.BuiltinFS)
	if err != nil {
		return nil, err
	}
	ld := newLoader(opts)
	ld.pbDir = src.Dir()
	pb := &playbook.Playbook{Path: src.String(), Src: src, Options: opts}
	ld.loadPlaybookFile(ctx, pb, src, true)
	ld.extend(ctx, pb)
	if err := ld.err(); err != nil {
		return nil, err
	}
	pb.Hash = hex.EncodeToString(ld.hash.Sum(nil))
	pb.Eval = ld.ev
	return pb, nil
}

// LoadBytes loads a playbook from memory; name is used in messages and relative
// paths resolve against dir on disk. It serves tests and fuzzing.
func LoadBytes(ctx context.Context, name string, data []byte, opts playbook.LoadOptions) (*playbook.Playbook, error) {
	ld := newLoader(opts)
	src, err := playbook.DiskSource(name)
	if err != nil {
		return nil, err
	}
	ld.pbDir = src.Dir()
	pb := &playbook.Playbook{Path: name, Src: src, Options: opts}
	root, err := playbook.ParseYAML(name, data)
	if err != nil {
		return nil, err
	}
	ld.hash.Write(data)
	ld.playbookNode(ctx, pb, root, src, true)
	ld.extend(ctx, pb)
	if err := ld.err(); err != nil {
		return nil, err
	}
	pb.Hash = hex.EncodeToString(ld.hash.Sum(nil))
	pb.Eval = ld.ev
	return pb, nil
}

// extend adds what lies beside the playbook: overlays, checked and hashed,
// and hook plays.
func (ld *loader) extend(ctx context.Context, pb *playbook.Playbook) {
	pb.Overlays = ld.overlayDirs(pb.Src)
	ld.checkOverlays(pb.Overlays)
	ld.loadHooks(ctx, pb, pb.Overlays)
	pb.RoleDirs = ld.roleDirs
}

func newLoader(opts playbook.LoadOptions) *loader {
	return &loader{opts: opts, ev: eval.New(), hash: sha256.New(), seen: map[string]bool{}, handlerRoles: map[string]bool{}, roleDirs: map[string]playbook.Source{}}
}

func (ld *loader) err() error {
	if len(ld.errs) == 0 {
		return nil
	}
	errs := ld.errs
	if len(errs) > maxErrors {
		errs = append(errs[:maxErrors:maxErrors], fmt.Errorf("... and %d more errors", len(ld.errs)-maxErrors))
	}
	return errors.Join(errs...)
}

func (ld *loader) errorf(p playbook.Pos, format string, args ...any) {
	ld.errs = append(ld.errs, fmt.Errorf("%s: %s", p, fmt.Sprintf(format, args...)))
}

func (ld *loader) taskErrorf(p playbook.Pos, task, format string, args ...any) {
	if task != "" {
		format = "task %q: " + format
		args = append([]any{task}, args...)
	}
	ld.errorf(p, format, args...)
}

// resolvePlaybook turns a reference into a playbook file.
func resolvePlaybook(ref string, builtin fs.FS) (playbook.Source, error) {
	if ref == "" {
		return playbook.Source{}, errors.New("no playbook given")
	}
	if st, err := os.Stat(ref); err == nil {
		src, err := playbook.DiskSource(ref)
		if err != nil {
			return playbook.Source{}, err
		}
		if !st.IsDir() {
			return src, nil
		}
		if f, ok := src.YAMLFile("playbook"); ok {
			return f, nil
		}
		return playbook.Source{}, fmt.Errorf("%s: directory has no playbook.yaml", ref)
	}
	if builtin != nil {
		name := strings.TrimPrefix(path.Clean(filepath.ToSlash(ref)), "playbooks/")
		root := playbook.Source{Fsys: builtin, Name: "playbooks", Builtin: true}
		if dir := root.Join(name); dir.IsDir() {
			if f, ok := dir.YAMLFile("playbook"); ok {
				return f, nil
			}
		}
		if f, ok := root.YAMLFile(name); ok {
			return f, nil
		}
	}
	return playbook.Source{}, fmt.Errorf("playbook %q not found: no such file or directory, and no built-in playbook of that name%s", ref, playbook.DidYouMean(ref, builtinPlaybooks(builtin)))
}

// builtinPlaybooks lists the names of the embedded playbooks.
func builtinPlaybooks(builtin fs.FS) []string {
	if builtin == nil {
		return nil
	}
	ents, err := fs.ReadDir(builtin, "playbooks")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(strings.TrimSuffix(e.Name(), ".yaml"), ".yml"))
	}
	return out
}

// readYAML reads and parses a file and adds it to the playbook hash.
func (ld *loader) readYAML(src playbook.Source) (*ytree.Node, bool) {
	data, err := src.Read()
	if err != nil {
		ld.errs = append(ld.errs, fmt.Errorf("%s: %w", src, err))
		return nil, false
	}
	if key := ld.stable(src); !ld.seen[key] {
		ld.seen[key] = true
		ld.hash.Write([]byte(key))
		ld.hash.Write([]byte{0})
		ld.hash.Write(data)
	}
	n, err := playbook.ParseYAML(src.String(), data)
	if err != nil {
		ld.errs = append(ld.errs, err)
		return nil, false
	}
	return n, true
}

// stable names a file independently of the current directory, for the
// playbook hash and journal keys: relative to the playbook's directory when
// under it.
func (ld *loader) stable(src playbook.Source) string {
	if src.Builtin {
		return "builtin:" + src.Name
	}
	if ld.pbDir.Fsys != nil && !ld.pbDir.Builtin {
		if rel, ok := strings.CutPrefix(src.Name, ld.pbDir.Name+"/"); ok {
			return rel
		}
	}
	return "/" + src.Name
}

func (ld *loader) push(src playbook.Source, at playbook.Pos) bool {
	key := src.String()
	for _, s := range ld.stack {
		if s == key {
			ld.errorf(at, "%s includes itself (%s)", key, strings.Join(append(ld.stack, key), " -> "))
			return false
		}
	}
	if len(ld.stack) >= maxIncludeDepth {
		ld.errorf(at, "includes nested deeper than %d levels", maxIncludeDepth)
		return false
	}
	ld.stack = append(ld.stack, key)
	return true
}

func (ld *loader) pop() { ld.stack = ld.stack[:len(ld.stack)-1] }

func (ld *loader) loadPlaybookFile(ctx context.Context, pb *playbook.Playbook, src playbook.Source, top bool) {
	root, ok := ld.readYAML(src)
	if !ok {
		return
	}
	if !ld.push(src, playbook.Pos{File: src.String()}) {
		return
	}
	defer ld.pop()
	ld.playbookNode(ctx, pb, root, src, top)
}

var headerKeys = map[string]bool{"name": true, "version": true, "requires": true, "vars": true, "plays": true, "description": true, "inventory": true, "defaults_files": true, "play_defaults": true}

// playDefaultKeys are the play keywords a playbook's play_defaults may set:
// how its plays run, never what they run on or select (hosts, tags, when,
// serial stay on each play, where a reader looks for them).
var playDefaultKeys = map[string]bool{"become": true, "any_errors_fatal": true, "force_handlers": true, "gather_facts": true, "strategy": true, "max_fail_percentage": true, "connection": true}

// readPlayDefaults checks a header's play_defaults: a mapping of
// playDefaultKeys.
func (ld *loader) readPlayDefaults(n *ytree.Node) *ytree.Node {
	if n == nil || n.IsNull() {
		return nil
	}
	if n.Kind != ytree.Map {
		ld.errorf(n.Pos, "play_defaults must be a mapping of play keywords such as {become: true}, not %s", n.KindName())
		return nil
	}
	for _, k := range n.Keys {
		if ks := k.KeyString(); !playDefaultKeys[ks] {
			ld.errorf(k.Pos, "play_defaults: %q cannot be defaulted; play_defaults takes %s", ks, strings.Join(slices.Sorted(maps.Keys(playDefaultKeys)), ", "))
		}
	}
	return n
}

// withPlayDefaults returns the play pn with the keys of defaults it does
// not write itself, as if it wrote them: a play's own value wins.
func withPlayDefaults(pn, defaults *ytree.Node) *ytree.Node {
	if defaults == nil || pn.Kind != ytree.Map {
		return pn
	}
	merged := *pn
	merged.Keys, merged.Vals = slices.Clone(pn.Keys), slices.Clone(pn.Vals)
	for i, k := range defaults.Keys {
		if playDefaultKeys[k.KeyString()] && pn.Get(k.KeyString()) == nil {
			merged.Keys = append(merged.Keys, k)
			merged.Vals = append(merged.Vals, defaults.Vals[i])
		}
	}
	return &merged
}

// playbookNode reads either the kubexm form (a mapping with a header and
// plays) or the Ansible form (a plain list of plays).
func (ld *loader) playbookNode(ctx context.Context, pb *playbook.Playbook, root *ytree.Node, src playbook.Source, top bool) {
	var plays *ytree.Node
	var headerVars, defaults playbook.VarList
	var playDefaults *ytree.Node
	switch root.Kind {
	case ytree.List:
		plays = root
	case ytree.Map:
		for _, k := range root.Keys {
			if ks := k.KeyString(); !headerKeys[ks] {
				ld.errorf(k.Pos, "unknown playbook key %q%s; a playbook is {name, version, description, requires, inventory, vars, defaults_files, play_defaults, plays}", ks, playbook.DidYouMean(ks, playbook.KeysOf(headerKeys)))
			}
		}
		name, _ := root.Get("name").Str()
		version := scalarString(root.Get("version"))
		requires := map[string]string{}
		if r := root.Get("requires"); r != nil {
			if r.Kind != ytree.Map {
				ld.errorf(r.Pos, "requires must be a mapping such as {kubexm: \">=0.1.0\"}, not %s", r.KindName())
			} else {
				for i, k := range r.Keys {
					requires[k.KeyString()] = scalarString(r.Vals[i])
					ld.checkRequire(k.KeyString(), r.Vals[i])
				}
			}
		}
		needsCluster := false
		if in := root.Get("inventory"); in != nil {
			switch s := scalarString(in); s {
			case "cluster":
				needsCluster = true
			case "any":
			default:
				ld.errorf(in.Pos, "inventory must be cluster (the playbook needs a cluster.yaml) or any (an Ansible-style inventory will do), not %q", s)
			}
		}
		if top {
			pb.Name, pb.Version, pb.Requires = name, version, requires
		}
		// An imported playbook that needs a cluster makes the whole run need one.
		pb.NeedsCluster = pb.NeedsCluster || needsCluster
		headerVars = ld.varsNode(root.Get("vars"))
		defaults = ld.varsFiles(root.Get("defaults_files"), src, "defaults_files")
		playDefaults = ld.readPlayDefaults(root.Get("play_defaults"))
		plays = root.Get("plays")
		if plays == nil {
			ld.errorf(root.Pos, "playbook has no plays: list them under `plays:`")
			return
		}
		if plays.Kind != ytree.List {
			ld.errorf(plays.Pos, "plays must be a list, not %s", plays.KindName())
			return
		}
	default:
		ld.errorf(root.Pos, "a playbook must be a mapping {name, version, requires, plays} or a list of plays, not %s", root.KindName())
		return
	}
	if top && pb.Name == "" {
		pb.Name = playbookName(src)
	}
	for _, pn := range plays.List {
		if ctx.Err() != nil {
			ld.errs = append(ld.errs, ctx.Err())
			return
		}
		if pn.Kind == ytree.Map {
			if imp := pn.Get("import_playbook"); imp != nil {
				ld.importPlaybook(ctx, pb, pn, imp, src)
				continue
			}
		}
		if p := ld.parsePlay(withPlayDefaults(pn, playDefaults), src, headerVars); p != nil {
			p.Defaults = defaults
			p.Index = len(pb.Plays)
			pb.Plays = append(pb.Plays, p)
		}
	}
}

func playbookName(src playbook.Source) string {
	b := src.Base()
	if b == "playbook.yaml" || b == "playbook.yml" {
		return src.Dir().Base()
	}
	return strings.TrimSuffix(strings.TrimSuffix(b, ".yaml"), ".yml")
}

func (ld *loader) checkRequire(prog string, n *ytree.Node) {
	c := scalarString(n)
	cons, err := semver.NewConstraint(c)
	if err != nil {
		ld.errorf(n.Pos, "requires %s: %q is not a version constraint such as \">=0.1.0\": %v", prog, c, err)
		return
	}
	if prog != "kubexm" || ld.opts.Version == "" {
		return
	}
	v, err := semver.NewVersion(strings.TrimPrefix(ld.opts.Version, "v"))
	if err != nil {
		ld.errorf(n.Pos, "requires kubexm %s, but this kubexm's version %q is not a semantic version", c, ld.opts.Version)
		return
	}
	if ok, reasons := cons.Validate(v); !ok {
		msg := ""
		if len(reasons) > 0 {
			msg = ": " + reasons[0].Error()
		}
		ld.errorf(n.Pos, "this playbook requires kubexm %s, but this is kubexm %s%s; use a matching kubexm or the playbook version made for it", c, ld.opts.Version, msg)
	}
}

func (ld *loader) importPlaybook(ctx context.Context, pb *playbook.Playbook, pn, imp *ytree.Node, from playbook.Source) {
	for _, k := range pn.Keys {
		if ks := k.KeyString(); ks != "import_playbook" && ks != "name" {
			ld.errorf(k.Pos, "import_playbook takes no other key than name, got %q", ks)
		}
	}
	ref, ok := imp.Str()
	if !ok || ref == "" {
		ld.errorf(imp.Pos, "import_playbook needs a playbook path or name")
		return
	}
	var target playbook.Source
	found := false
	cand := from.Dir().Join(ref)
	if cand.IsDir() {
		target, found = cand.YAMLFile("playbook")
	} else if cand.IsFile() {
		target, found = cand, true
	}
	if !found && ld.opts.BuiltinFS != nil {
		// A fork of one playbook file has no copy of the files it imports
		// beside it or from a sibling playbook (../create-cluster/x.yaml):
		// those are the built-in playbook's of the same name, as the
		// roles of its defaults_files are the built-in roles.
		name := ref
		if rel := path.Join(from.Dir().Base(), ref); !from.Builtin && !path.IsAbs(ref) && !strings.HasPrefix(rel, "../") {
			name = rel
		}
		if s, err := resolvePlaybook(name, ld.opts.BuiltinFS); err == nil && s.Builtin {
			target, found = s, true
		}
	}
	if !found {
		ld.errorf(imp.Pos, "import_playbook %q: not found beside %s nor among the built-in playbooks", ref, from)
		return
	}
	ld.loadPlaybookFile(ctx, pb, target, false)
}

// varsFiles reads the variables of a list of YAML files named relative to
// src's directory, later files over earlier ones.
// underRoles returns the part of a relative path after its roles/
// directory: "../../roles/artifacts/defaults/main.yaml" gives
// "artifacts/defaults/main.yaml".
func underRoles(p string) (string, bool) {
	parts := strings.Split(path.Clean(p), "/")
	for i, s := range parts[:len(parts)-1] {
		if s == "roles" {
			return strings.Join(parts[i+1:], "/"), true
		}
	}
	return "", false
}

func (ld *loader) varsFiles(list *ytree.Node, src playbook.Source, key string) playbook.VarList {
	if list == nil {
		return nil
	}
	var out playbook.VarList
	for _, f := range ld.stringList(list, key) {
		file := src.Dir().Join(f.Expr)
		// A fork of one playbook has no copy of the roles its
		// defaults_files name (../../roles/...): such a file is found
		// where the roles are, the fork's roles/ first, then the built-ins.
		if rel, ok := underRoles(f.Expr); ok && !file.IsFile() {
			if c, ok := playbook.RolesFile(ld.pbDir, ld.opts, rel); ok {
				file = c
			}
		}
		n, ok := ld.readYAML(file)
		if !ok {
			continue
		}
		if n.Kind != ytree.Map && !n.IsNull() {
			ld.errorf(n.Pos, "a file of %s must be a mapping of variable names to values", key)
			continue
		}
		out = append(out, ld.varsNode(n)...)
	}
	return out
}

func (ld *loader) parsePlay(pn *ytree.Node, src playbook.Source, headerVars playbook.VarList) *playbook.Play {
	if pn.Kind != ytree.Map {
		ld.errorf(pn.Pos, "a play must be a mapping with hosts and tasks, not %s", pn.KindName())
		return nil
	}
	name, _ := pn.Get("name").Str()
	ld.checkPlayKeys(pn, name)
	p := &playbook.Play{Name: name, Pos: pn.Pos, Src: src, MaxFailPercentage: -1, Strategy: "linear"}
	ld.play = p
	ld.handlerRoles = map[string]bool{}
	ld.seenRoles = map[string]bool{}
	ld.playHosts(p, pn)
	p.Vars = append(append(playbook.VarList{}, headerVars...), ld.varsNode(pn.Get("vars"))...)
	p.Vars = append(p.Vars, ld.varsFiles(pn.Get("vars_files"), src, "vars_files")...)
	for _, kw := range playKeywords {
		if v := pn.Get(kw.name); v != nil && kw.parse != nil {
			kw.parse(ld, p, v)
		}
	}
	for _, t := range ld.hookTags {
		if !slices.Contains(p.Tags, t) {
			p.Tags = append(p.Tags, t)
		}
	}
	// What every task of the play inherits, as from a block around them.
	base := &playbook.Task{Tags: p.Tags, When: p.When, Become: p.Become}
	ld.playDefaults(base, pn)
	ld.playTasks(p, pn, taskCtx{src: src, parent: base, play: p})
	ld.checkNotify(p)
	return p
}

// checkPlayKeys reports the keys a play does not know, with a hint for a
// task keyword or builtin written on the play.
func (ld *loader) checkPlayKeys(pn *ytree.Node, name string) {
	keys := playKeys()
	for _, k := range pn.Keys {
		if ks := k.KeyString(); !keys[ks] {
			hint := playbook.AnsibleHint(ks)
			if hint == "" {
				hint = playbook.DidYouMean(ks, playbook.KeysOf(keys))
			}
			if _, isTask := taskKeys[ks]; isTask || ld.opts.Builtins[ks] != nil {
				hint = "; tasks go under tasks:"
			}
			ld.errorf(k.Pos, "play %q: unknown play key %q%s", name, ks, hint)
		}
	}
}

// playHosts reads the play's host pattern; an unnamed play is called by it,
// as in Ansible.
func (ld *loader) playHosts(p *playbook.Play, pn *ytree.Node) {
	hn := pn.Get("hosts")
	switch {
	case hn == nil:
		ld.errorf(pn.Pos, "play %q has no hosts", p.Name)
	case hn.Kind == ytree.List:
		var parts []string
		for _, e := range hn.List {
			s, ok := e.Str()
			if !ok {
				ld.errorf(e.Pos, "hosts entries must be strings")
			}
			parts = append(parts, s)
		}
		p.Hosts = strings.Join(parts, ":")
	default:
		s, ok := hn.Str()
		if !ok || strings.TrimSpace(s) == "" {
			ld.errorf(hn.Pos, "hosts must be a pattern such as \"all\", \"etcd\" or \"masters:&workers\"")
		}
		p.Hosts = s
	}
	if err := playbook.CheckPattern(p.Hosts); err != nil && hn != nil {
		ld.errorf(hn.Pos, "hosts: %v", err)
	}
	if p.Name == "" {
		p.Name = p.Hosts
	}
}

// playTasks reads the play's task lists, its roles and its handlers.
func (ld *loader) playTasks(p *playbook.Play, pn *ytree.Node, ctxt taskCtx) {
	p.PreTasks = ld.taskList(pn.Get("pre_tasks"), ctxt, "pre_tasks")
	if rn := pn.Get("roles"); rn != nil {
		if rn.Kind != ytree.List {
			ld.errorf(rn.Pos, "roles must be a list")
		} else {
			for _, r := range rn.List {
				if t := ld.roleRef(r, ctxt); t != nil {
					p.Roles = append(p.Roles, t)
				}
			}
		}
	}
	p.Tasks = ld.taskList(pn.Get("tasks"), ctxt, "tasks")
	p.PostTasks = ld.taskList(pn.Get("post_tasks"), ctxt, "post_tasks")
	hctx := ctxt
	hctx.handler = true
	p.Handlers = append(ld.taskList(pn.Get("handlers"), hctx, "handlers"), p.Handlers...)
}

// checkNotify makes sure every notify names a handler.
func (ld *loader) checkNotify(p *playbook.Play) {
	names := map[string]bool{}
	for _, h := range p.Handlers {
		names[h.Name] = true
		for _, l := range h.Listen {
			names[l] = true
		}
	}
	check := func(t *playbook.Task, _ []*playbook.Task) bool {
		for _, n := range t.Notify {
			if !names[n] && !strings.Contains(n, "{{") {
				ld.taskErrorf(t.Pos, t.Name, "notify %q: no handler of that name%s", n, playbook.DidYouMean(n, playbook.KeysOf(names)))
			}
		}
		return true
	}
	for _, s := range p.Sections() {
		playbook.WalkTasks(s, nil, check)
	}
	playbook.WalkTasks(p.Handlers, nil, check)
}

// templateRefs adds to refs the variables the templates in v read.
func (ld *loader) templateRefs(v any, refs []string) []string {
	return playbook.AppendTemplateRefs(ld.ev.Refs, v, refs)
}

func (ld *loader) varsNode(n *ytree.Node) playbook.VarList {
	if n.IsNull() {
		return nil
	}
	if n.Kind != ytree.Map {
		ld.errorf(n.Pos, "vars must be a mapping, not %s", n.KindName())
		return nil
	}
	var out playbook.VarList
	for i, k := range n.Keys {
		name := k.KeyString()
		if !playbook.IdentRe.MatchString(name) {
			ld.errorf(k.Pos, "variable name %q is not an identifier (letters, digits, _)", name)
			continue
		}
		v := n.Vals[i].Value()
		tmpl := ld.checkTemplates(n.Vals[i], "")
		d := playbook.VarDef{Name: name, Val: v, Pos: k.Pos, Template: tmpl}
		if tmpl {
			d.Refs = ld.templateRefs(v, nil)
		}
		out = append(out, d)
	}
	return out
}

// checkTemplates checks the syntax of every {{ }} under n and reports whether
// there was any.
func (ld *loader) checkTemplates(n *ytree.Node, task string) bool {
	if n == nil {
		return false
	}
	switch n.Kind {
	case ytree.Map:
		any := false
		for _, v := range n.Vals {
			if ld.checkTemplates(v, task) {
				any = true
			}
		}
		return any
	case ytree.List:
		any := false
		for _, v := range n.List {
			if ld.checkTemplates(v, task) {
				any = true
			}
		}
		return any
	}
	s, ok := n.Str()
	if !ok || !strings.Contains(s, "{") {
		return false
	}
	if err := ld.ev.CheckTemplate(s); err != nil {
		ld.taskErrorf(n.Pos, task, "%v", err)
	}
	return strings.Contains(s, "{{")
}

func (ld *loader) stringList(n *ytree.Node, what string) []playbook.Cond {
	if n == nil {
		return nil
	}
	vals := []*ytree.Node{n}
	if n.Kind == ytree.List {
		vals = n.List
	}
	var out []playbook.Cond
	for _, v := range vals {
		if v.Kind != ytree.Scalar || v.Scalar == nil {
			ld.errorf(v.Pos, "%s: expected a string or a list of strings, got %s", what, v.KindName())
			continue
		}
		out = append(out, playbook.Cond{Expr: scalarString(v), Pos: v.Pos})
	}
	return out
}

func (ld *loader) tags(n *ytree.Node) []string {
	var out []string
	for _, c := range ld.stringList(n, "tags") {
		for _, t := range strings.Split(c.Expr, ",") {
			if t = strings.TrimSpace(t); t != "" {
				out = append(out, t)
			}
		}
	}
	return out
}

// conds reads when/changed_when/failed_when: an expression, a list of them
// (all must hold) or a boolean. task names the task in errors ("" for a
// play's when).
func (ld *loader) conds(n *ytree.Node, task string) []playbook.Cond {
	out := ld.stringList(n, "condition")
	for _, c := range out {
		if strings.Contains(c.Expr, "{{") {
			ld.taskErrorf(c.Pos, task, "conditions are expressions, not templates: write %q without {{ }}", strings.TrimSpace(strings.Trim(strings.TrimSpace(c.Expr), "{}")))
			continue
		}
		if err := ld.ev.CheckExpr(c.Expr); err != nil {
			ld.taskErrorf(c.Pos, task, "%v", err)
		}
	}
	return out
}

func (ld *loader) boolField(n *ytree.Node, what string) bool {
	if n == nil {
		return false
	}
	b, err := step.ToBool(n.Value())
	if err != nil || n.Kind != ytree.Scalar {
		ld.errorf(n.Pos, "%s must be true or false, not %s", what, scalarString(n))
	}
	return b
}

func scalarString(n *ytree.Node) string {
	if n == nil {
		return ""
	}
	if n.Kind != ytree.Scalar {
		return n.KindName()
	}
	if n.Scalar == nil {
		return ""
	}
	if s, ok := n.Scalar.(string); ok {
		return s
	}
	return fmt.Sprint(n.Scalar)
}
