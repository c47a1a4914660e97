package engine

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/mensylisir/kubexm/schema/validate"

	"github.com/mensylisir/kubexm"
	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/engine/playbook"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/variables"
	"github.com/mensylisir/kubexm/schema"
)

// Every built-in playbook, started at the first task of each of its plays
// and run with each of its tags, is planned without connecting: the start
// point names a task, and no task that runs reads a fact (set_fact or
// register) that only a task left out would have set. Such a read is the
// undefined variable that stopped create-cluster --start-at-task
// 'etcd : etcd - member address' on os_package_list (issue 46).
func TestBuiltinPlaybooksStartAtAndTags(t *testing.T) {
	reg := map[string]step.Builtin{}
	for _, b := range builtins.All() {
		reg[b.Spec().Name] = b
	}
	cluster := filepath.Join(writeFiles(t, map[string]string{"cluster.yaml": `apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata: {name: c}
spec:
  hosts:
  - {name: n1, address: 192.0.2.1, internalAddress: 192.0.2.1}
  - {name: n2, address: 192.0.2.2, internalAddress: 192.0.2.2}
  roleGroups: {etcd: [n1], master: [n1], worker: [n2]}
`}), "cluster.yaml")
	c, _, err := validate.Load(cluster)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := schema.Inventory(c, cluster)
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := fs.ReadDir(kubexm.Content(), "playbooks")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, d := range dirs {
		pb, err := Load(context.Background(), d.Name(), LoadOptions{Builtins: reg, BuiltinFS: kubexm.Content()})
		if err != nil {
			t.Fatalf("%s: %v", d.Name(), err)
		}
		var runs []RunOptions
		tags := map[string]bool{}
		for _, p := range pb.Plays {
			for _, tag := range p.Tags {
				if tag != "always" && tag != "never" && !tags[tag] {
					tags[tag] = true
					runs = append(runs, RunOptions{Tags: []string{tag}})
				}
			}
			first := true
			for _, sec := range p.Sections() {
				playbook.WalkTasks(sec, nil, func(t *Task, _ []*Task) bool {
					if first && t.Kind == playbook.KindAction && !slices.Contains(t.Tags, "always") {
						first = false
						ns := playbook.TaskNames(t)
						runs = append(runs, RunOptions{StartAt: ns[len(ns)-1]})
					}
					return true
				})
			}
		}
		if d.Name() == "create-cluster" {
			runs = append(runs, RunOptions{StartAt: "etcd : etcd - member address"}, RunOptions{StartAt: "control-plane : *"})
		}
		for _, opts := range runs {
			sel, err := playbook.SelectTasks(pb, inv.Vars, playbook.SelectOptions{Tags: opts.Tags, SkipTags: opts.SkipTags, StartAt: opts.StartAt})
			if err != nil {
				t.Errorf("%s %+v: %v", d.Name(), opts, err)
				continue
			}
			checked++
			for _, v := range unsetReads(pb, sel, opts) {
				t.Errorf("%s --start-at-task %q --tags %q: %s", d.Name(), opts.StartAt, opts.Tags, v)
			}
		}
	}
	t.Logf("%d playbooks, %d --start-at-task and --tags runs planned", len(dirs), checked)
}

// unsetReads walks pb as a run with sel does and lists each task that runs
// and reads a fact only a left-out task sets.
func unsetReads(pb *Playbook, sel *playbook.Selection, opts RunOptions) []string {
	var out []string
	skippedSets := map[string]string{} // fact -> the left-out task setting it
	set := map[string]bool{}
	started := sel.Start == nil
	for i, p := range pb.Plays {
		playRuns := sel.Plays[p] && (started || i >= sel.StartPlay || slices.ContainsFunc(p.Roles, func(t *Task) bool { return sel.Always[t] }) ||
			slices.ContainsFunc(p.Tasks, func(t *Task) bool { return sel.Always[t] }))
		for _, sec := range p.Sections() {
			playbook.WalkTasks(sec, nil, func(t *Task, parents []*Task) bool {
				if t == sel.Start {
					started = true
				}
				runs := playRuns && playbook.TagsSelected(t.Tags, opts.Tags, opts.SkipTags) &&
					(started || sel.Path[t] || sel.Always[t] && t.Kind != playbook.KindAction || slices.Contains(t.Tags, "always"))
				for _, up := range parents {
					if up.Kind == playbook.KindInclude && !(playRuns && playbook.TagsSelected(up.Tags, opts.Tags, opts.SkipTags) && (started || sel.Path[up] || sel.Always[up])) {
						runs = false
					}
				}
				if t.Kind == playbook.KindBlock {
					return true
				}
				var sets []string
				if t.Action == "set_fact" {
					sets = playbook.KeysOf(t.Args)
				}
				if t.Register != "" {
					sets = append(sets, t.Register)
				}
				if !runs {
					// A left-out task registers a skipped result.
					if t.Register != "" {
						set[t.Register] = true
					}
					for _, s := range sets {
						if _, ok := skippedSets[s]; !ok {
							skippedSets[s] = fmt.Sprintf("%q (%s)", t.Name, t.Where())
						}
					}
					return true
				}
				text := fmt.Sprint(t.Args, t.Loop, t.Vars)
				for _, c := range t.When {
					text += " " + c.Expr
				}
				if t.Include != nil {
					text += fmt.Sprint(t.Include.Vars)
				}
				for name, by := range skippedSets {
					if !set[name] && !slices.Contains(sets, name) && variables.NamesVar(text, name) && !guarded(text, name) {
						out = append(out, fmt.Sprintf("task %q (%s) reads %s, which only %s sets, and that task is left out", t.Name, t.Where(), name, by))
					}
				}
				for _, s := range sets {
					set[s] = true
				}
				return true
			})
		}
	}
	return out
}

// guarded says whether text reads name only with a fallback for when it is
// not set: `name ?? x`, `name.a ?? x`, `.name | default x`,
// `.name.a | default x`.
func guarded(text, name string) bool {
	q := regexp.QuoteMeta(name)
	return regexp.MustCompile(`\b` + q + `(\.\w+)*\s*\?\?|\.` + q + `(\.\w+)*\s*\|\s*default\b`).MatchString(text)
}
