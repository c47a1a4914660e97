package load

import (
	"context"
	"fmt"
	"github.com/mensylisir/kubexm/engine/playbook"
	"io/fs"
	"regexp"
	"slices"
	"strings"
)

// Phases and hooks. A play may name the phase it belongs to (`phase: os`);
// the engine knows no phase names, the playbooks choose them. The plays of
// one phase are consecutive. Hook playbooks (ordinary lists of plays) run
// right before the first play of a phase (before-<phase>) or right after its
// last (after-<phase>), found in, in this order:
//
//  1. the playbook's own directory (NAME/playbook.yaml's, not a single
//     file's): hooks/before-<phase>.yaml
//  2. each site/ directory, then each --overlay directory in the order
//     given: hooks/<playbook name>/before-<phase>.yaml (an overlay serves
//     several playbooks, so it names the one it hooks)
//  3. LoadOptions.Hooks (cluster.yaml's spec.hooks), in their order.
//
// A hook's plays inherit the tags of its phase's plays (all of them), so
// --tags and --skip-tags select a phase together with its hooks.

var (
	phaseRe    = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	hookFileRe = regexp.MustCompile(`^(before|after)-(.+)\.ya?ml$`)
)

// hookFile is one hook found or declared, before it is loaded.
type hookFile struct {
	when, phase string
	src         playbook.Source
	from        string // where it was declared, or "" for a found file
}

// phaseSpan is where a phase's plays are in the playbook.
type phaseSpan struct {
	name        string
	first, last int
	tags        []string // the union of its plays' tags
}

// phases lists the phases of pb in play order and reports a phase whose
// plays are not consecutive.
func (ld *loader) phases(pb *playbook.Playbook) []*phaseSpan {
	var out []*phaseSpan
	byName := map[string]*phaseSpan{}
	for i, p := range pb.Plays {
		if p.Phase == "" {
			continue
		}
		s := byName[p.Phase]
		switch {
		case s == nil:
			s = &phaseSpan{name: p.Phase, first: i}
			byName[p.Phase] = s
			out = append(out, s)
		case s.last != i-1:
			other := pb.Plays[s.last+1]
			ld.errorf(p.Pos, "play %q is in phase %s, but play %q between it and the phase's earlier plays is not: keep the plays of a phase together (hooks run before its first play and after its last)", p.Name, p.Phase, other.Name)
		}
		s.last = i
		for _, t := range p.Tags {
			if !slices.Contains(s.tags, t) {
				s.tags = append(s.tags, t)
			}
		}
	}
	return out
}

// findHooks lists the hook files of pb's directory, of the overlay
// directories and of the options.
func (ld *loader) findHooks(pb *playbook.Playbook, overlays []playbook.Source) []hookFile {
	var out []hookFile
	if ownsDir(pb.Src) {
		out = append(out, ld.hookDir(ld.pbDir.Join("hooks"))...)
	}
	// overlays is highest precedence first; hooks run lowest first, so a
	// later --overlay's hook runs after an earlier one's.
	for _, o := range slices.Backward(overlays) {
		out = append(out, ld.hookDir(o.Join("hooks").Join(pb.Name))...)
	}
	for _, h := range ld.opts.Hooks {
		if h.Playbook != "" && h.Playbook != pb.Name {
			continue
		}
		if h.When != "before" && h.When != "after" {
			ld.errs = append(ld.errs, fmt.Errorf("%s: hook when must be before or after, not %q", h.From, h.When))
			continue
		}
		src, err := playbook.DiskSource(h.File)
		if err != nil || !src.IsFile() {
			ld.errs = append(ld.errs, fmt.Errorf("%s: hook playbook %s not found", h.From, h.File))
			continue
		}
		out = append(out, hookFile{when: h.When, phase: h.Phase, src: src, from: h.From})
	}
	return out
}

// hookDir reads the before-/after- files of one hooks directory; any other
// YAML file there is a misnamed hook (helper files go in subdirectories).
func (ld *loader) hookDir(dir playbook.Source) []hookFile {
	if !dir.IsDir() {
		return nil
	}
	ents, err := fs.ReadDir(dir.Fsys, dir.Name)
	if err != nil {
		ld.errs = append(ld.errs, fmt.Errorf("%s: %w", dir, err))
		return nil
	}
	var out []hookFile
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		m := hookFileRe.FindStringSubmatch(e.Name())
		if m == nil {
			if strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml") {
				ld.errs = append(ld.errs, fmt.Errorf("%s: a hook file is named before-<phase>.yaml or after-<phase>.yaml; files a hook includes go in a subdirectory", dir.Join(e.Name())))
			}
			continue
		}
		out = append(out, hookFile{when: m[1], phase: m[2], src: dir.Join(e.Name())})
	}
	return out
}

// loadHooks loads every hook and splices its plays in beside its phase.
func (ld *loader) loadHooks(ctx context.Context, pb *playbook.Playbook, overlays []playbook.Source) {
	spans := ld.phases(pb)
	hooks := ld.findHooks(pb, overlays)
	if len(hooks) == 0 {
		return
	}
	var names []string
	byName := map[string]*phaseSpan{}
	for _, s := range spans {
		names = append(names, s.name)
		byName[s.name] = s
	}
	before, after := map[string][]*playbook.Play{}, map[string][]*playbook.Play{}
	for _, h := range hooks {
		where := h.src.String()
		if h.from != "" {
			where = h.from + ": " + where
		}
		s := byName[h.phase]
		if s == nil {
			known := "it declares none (phase: on its plays)"
			if len(names) > 0 {
				known = "its phases are " + strings.Join(names, ", ")
			}
			ld.errs = append(ld.errs, fmt.Errorf("%s: hook of phase %q, which playbook %s does not have%s; %s", where, h.phase, pb.Name, playbook.DidYouMean(h.phase, names), known))
			continue
		}
		plays := ld.hookPlays(ctx, pb, h, s)
		if h.when == "before" {
			before[s.name] = append(before[s.name], plays...)
		} else {
			after[s.name] = append(after[s.name], plays...)
		}
	}
	var out []*playbook.Play
	for i, p := range pb.Plays {
		for _, s := range spans {
			if s.first == i {
				out = append(out, before[s.name]...)
			}
		}
		out = append(out, p)
		for _, s := range spans {
			if s.last == i {
				out = append(out, after[s.name]...)
			}
		}
	}
	for i, p := range out {
		p.Index = i
	}
	pb.Plays = out
}

// hookPlays loads one hook file as a playbook of its own (its relative
// paths resolve from its directory) and marks its plays as the phase's.
func (ld *loader) hookPlays(ctx context.Context, pb *playbook.Playbook, h hookFile, s *phaseSpan) []*playbook.Play {
	sub := &playbook.Playbook{Name: pb.Name, Src: h.src, Options: pb.Options}
	saved := ld.opts
	// Roles of the hook's own (roles/ beside it) are found after the
	// playbook's and before --roles-path.
	if r := h.src.Dir().Join("roles"); r.IsDir() && !r.Builtin {
		ld.opts.RolesPath = append([]string{"/" + r.Name}, ld.opts.RolesPath...)
	}
	ld.hookTags = s.tags
	ld.loadPlaybookFile(ctx, sub, h.src, false)
	ld.hookTags, ld.opts = nil, saved
	pb.NeedsCluster = pb.NeedsCluster || sub.NeedsCluster
	// The hooked phase's shared defaults (the playbook's defaults_files) come
	// first, so a hook reads kube_bin_dir or kubernetes_admin_kubeconfig as
	// the phase's plays do; the hook file's own header ranks above them.
	shared := pb.Plays[s.first].Defaults
	for _, p := range sub.Plays {
		p.Defaults = append(slices.Clip(shared), p.Defaults...)
		if p.Phase != "" && p.Phase != s.name {
			ld.errorf(p.Pos, "play %q of hook %s says phase %s; a hook's plays belong to the phase it hooks (%s)", p.Name, h.src, p.Phase, s.name)
		}
		p.Phase = s.name
		p.Hook = h.when + "-" + s.name
	}
	return sub.Plays
}
