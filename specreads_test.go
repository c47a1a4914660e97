package kubexm_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// One home per default (issue 48): the roles and playbooks read role
// variables, and only a role's defaults/main.yaml maps cluster.yaml's spec
// onto them (roles/artifacts/defaults/main.yaml holds the cluster's
// choices every play switches on: kubernetes_type, etcd_type, ...). A
// default of a spec field lives in schema/defaults.go alone, so no file
// falls back on a literal when a spec field is empty.
//
// specReadCeiling is the ratchet that moved the roles over: the reads of
// spec a file outside the defaults files may still have. None is left; an
// entry may only go down, and a file over its figure fails naming the
// reads.
var specReadCeiling = map[string]int{}

// specFallbackCeiling is the same ratchet for the fallbacks on spec fields
// still written in a file: none is left. A field the schema defaults only
// when its section is there (etcd.type external has no dataDir, a cluster
// without spec.dns.nodelocaldns no localIP) gives its role variable a
// documented empty meaning instead of a second literal
// (roles/etcd/defaults/main.yaml etcd_data_dir,
// roles/artifacts/defaults/main.yaml nodelocaldns_ip).
var specFallbackCeiling = map[string]int{}

var (
	// A template action: {{ ... }}, not a comment {{/* */}}.
	templateAction = regexp.MustCompile(`(?s)\{\{(-?\s*/\*.*?\*/\s*-?\}\}|.*?\}\})`)
	// .spec or $.spec in a template action ("spec.x" in a string is a
	// field's name in a message, not a read).
	templateSpecRead = regexp.MustCompile(`(^|[^\w"'.])\$?\.spec\b`)
	// spec.x | default ..., default X .spec.x, and spec.x ?? ... : a
	// second default of a spec field.
	templateSpecFallback = regexp.MustCompile(`\.spec(\.[\w]+)+\s*\|\s*default\b|\bdefault\s+(\([^)]*\)|"[^"]*"|\S+)\s+\$?\.spec\.`)
	exprSpecFallback     = regexp.MustCompile(`(^|[^\w.$])spec(\??\.[\w]+)+\s*\?\?`)
	// The keys whose values are expressions (expr-lang), not templates.
	exprKey = regexp.MustCompile(`^(\s*)(- )?(when|changed_when|failed_when|until|that):(.*)$`)
	// spec read in an expression, quoted strings removed first.
	exprSpecRead = regexp.MustCompile(`(^|[^\w.$#])spec\b`)
	quoted       = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'[^']*'`)
)

// specUse is one read of spec, or one fallback on a spec field.
type specUse struct {
	file     string
	line     int
	text     string
	fallback bool
}

// specUses scans a role or playbook file: template actions everywhere, and
// the expressions of when, changed_when, failed_when, until and that in
// YAML. Comments, task names and messages outside actions are prose.
func specUses(rel string, data []byte) []specUse {
	src := string(data)
	lineOf := func(off int) int { return strings.Count(src[:off], "\n") + 1 }
	lines := strings.Split(src, "\n")
	var out []specUse
	add := func(line int, fallback bool) {
		out = append(out, specUse{rel, line, strings.TrimSpace(lines[line-1]), fallback})
	}
	for _, m := range templateAction.FindAllStringIndex(src, -1) {
		action := src[m[0]:m[1]]
		if strings.HasPrefix(strings.TrimLeft(action[2:], "- \t\n"), "/*") {
			continue
		}
		for _, r := range templateSpecRead.FindAllStringIndex(action, -1) {
			add(lineOf(m[0]+r[0]), false)
		}
		for _, r := range templateSpecFallback.FindAllStringIndex(action, -1) {
			add(lineOf(m[0]+r[0]), true)
		}
	}
	if !strings.HasSuffix(rel, ".yaml") && !strings.HasSuffix(rel, ".yml") {
		return out
	}
	// An expression key's value runs on over the lines indented deeper
	// than the key (a block scalar, a list of conditions).
	indent := -1
	for i, l := range lines {
		trimmed := strings.TrimLeft(l, " ")
		ind := len(l) - len(trimmed)
		var expr string
		switch m := exprKey.FindStringSubmatch(l); {
		case indent >= 0 && (trimmed == "" || ind > indent || (ind == indent && strings.HasPrefix(trimmed, "- "))):
			expr = trimmed
		case m != nil:
			indent = len(m[1]) + len(m[2])
			expr = m[4]
		default:
			indent = -1
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(expr), "#") || strings.Contains(expr, "{{") {
			continue // a comment, or a template (scanned above)
		}
		expr, _, _ = strings.Cut(expr, " #")
		bare := quoted.ReplaceAllString(expr, `""`)
		if exprSpecRead.MatchString(bare) {
			add(i+1, false)
		}
		if exprSpecFallback.MatchString(bare) {
			add(i+1, true)
		}
	}
	return out
}

// TestSpecReadOnlyInDefaults walks the built-in roles and playbooks.
func TestSpecReadOnlyInDefaults(t *testing.T) {
	reads := map[string][]specUse{}
	var fallbacks []specUse
	for _, root := range []string{"roles", "playbooks"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel := filepath.ToSlash(p)
			ext := filepath.Ext(rel)
			// meta/ declares which field a variable follows, files/ is
			// copied as it is, support.yaml is the Go side's matrix.
			if (ext != ".yaml" && ext != ".yml" && ext != ".tmpl") || strings.Contains(rel, "/meta/") ||
				strings.Contains(rel, "/files/") || rel == "roles/support.yaml" {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			defaults := strings.Contains(rel, "/defaults/")
			for _, u := range specUses(rel, data) {
				switch {
				case u.fallback:
					fallbacks = append(fallbacks, u)
				case !defaults:
					reads[rel] = append(reads[rel], u)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	perFile := map[string][]specUse{}
	for _, u := range fallbacks {
		perFile[u.file] = append(perFile[u.file], u)
	}
	for f, us := range perFile {
		if len(us) <= specFallbackCeiling[f] {
			continue
		}
		for _, u := range us {
			t.Errorf("%s:%d: a fallback on a spec field (%s): its default lives in schema/defaults.go (SetDefaults), which every spec the roles see went through; drop the fallback, or give the field its default there (%d in the file, ceiling %d)", u.file, u.line, u.text, len(us), specFallbackCeiling[f])
		}
	}
	for f, n := range specFallbackCeiling {
		if len(perFile[f]) < n {
			t.Errorf("%s has %d fallbacks on spec fields, under its ceiling %d: lower specFallbackCeiling in specreads_test.go", f, len(perFile[f]), n)
		}
	}
	files := slices.Sorted(func(yield func(string) bool) {
		for f := range reads {
			if !yield(f) {
				return
			}
		}
	})
	total := 0
	for _, f := range files {
		n := len(reads[f])
		total += n
		if n > specReadCeiling[f] {
			var where []string
			for _, u := range reads[f] {
				where = append(where, fmt.Sprintf("  %s:%d: %s", u.file, u.line, u.text))
			}
			t.Errorf("%s reads spec %d times (ceiling %d): read a role variable instead, which the role's defaults/main.yaml maps from spec once (cluster-wide modes: roles/artifacts/defaults/main.yaml)\n%s",
				f, n, specReadCeiling[f], strings.Join(where, "\n"))
		}
	}
	for f, n := range specReadCeiling {
		if len(reads[f]) < n {
			t.Errorf("%s reads spec %d times, under its ceiling %d: lower specReadCeiling in specreads_test.go", f, len(reads[f]), n)
		}
	}
	t.Logf("spec read outside defaults files: %d times in %d files; fallbacks on spec fields: %d", total, len(files), len(fallbacks))
}

// TestSpecUsesSeesReads keeps the scanner honest: it finds the reads and
// fallbacks it is meant to, and leaves prose alone.
func TestSpecUsesSeesReads(t *testing.T) {
	src := `# a comment naming spec.etcd.type
- name: Timezone - from spec.system.timezone
  debug:
    msg: "set spec.etcd.type {{ .spec.etcd.type }} {{ $.spec.x }}"
  when: spec.kubernetes.type == "kubeadm" and x == "spec.y"
- name: b
  assert:
    that:
      - spec.etcd.type != ""
      - len(spec.a ?? []) > 0
  changed_when: >-
    a and
    spec.b
- name: c
  vars:
    v: "{{ .spec.a.b | default \"x\" }} {{ default 0 .spec.c }} {{/* .spec.d */}}"
    w: spec.not.an.expression
`
	var got []string
	for _, u := range specUses("t.yaml", []byte(src)) {
		got = append(got, fmt.Sprintf("%d:%v", u.line, u.fallback))
	}
	want := []string{"4:false", "4:false", "16:false", "16:true", "16:false", "16:true", "5:false", "9:false", "10:false", "10:true", "13:false"}
	if !slices.Equal(got, want) {
		t.Errorf("specUses found %v, want %v", got, want)
	}
}
