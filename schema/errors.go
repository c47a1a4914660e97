package schema

import (
	"fmt"
	"sort"
	"strings"

	"github.com/mensylisir/kubexm/internal/suggest"
	"github.com/mensylisir/kubexm/internal/ytree"
)

// Pos is a place in a cluster file. Line and Col are 1-based; zero means
// unknown (the value was defaulted, not written).
type Pos = ytree.Pos

// Problem is one thing wrong with a cluster file.
type Problem struct {
	Pos     Pos
	Path    string // field path, e.g. spec.hosts[0].address
	Message string
	Hint    string
	// cause marks a problem of reading the file (an unknown or mistyped
	// key), which validation's findings often follow from: a misspelt
	// roleGroups key leaves its group empty. Causes are listed first.
	cause bool
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.Pos.String())
	b.WriteString(": ")
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	if p.Hint != "" {
		b.WriteString(" (hint: ")
		b.WriteString(p.Hint)
		b.WriteString(")")
	}
	return b.String()
}

// Error lists every problem found in a cluster file, so one run shows them
// all instead of one per edit-and-retry cycle.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	if len(e.Problems) == 1 {
		return e.Problems[0].String()
	}
	lines := make([]string, 0, len(e.Problems)+1)
	lines = append(lines, fmt.Sprintf("%d problems in cluster file:", len(e.Problems)))
	for _, p := range e.Problems {
		lines = append(lines, "  "+p.String())
	}
	return strings.Join(lines, "\n")
}

// Warning is something accepted but worth telling the user.
type Warning struct {
	Pos     Pos
	Path    string
	Message string
}

func (w Warning) String() string {
	if w.Path == "" {
		return w.Pos.String() + ": " + w.Message
	}
	return w.Pos.String() + ": " + w.Path + ": " + w.Message
}

// source is what a Cluster remembers of the file it came from.
type source struct {
	file string         // as given to Parse
	abs  string         // absolute path, for relative file references
	pos  map[string]Pos // field path -> position of its value
}

// posOf returns the position of path, or of its nearest written parent.
func (s *source) posOf(path string) Pos {
	if s == nil {
		return Pos{}
	}
	for p := path; ; {
		if pos, ok := s.pos[p]; ok {
			return pos
		}
		i := strings.LastIndexAny(p, ".[")
		if i <= 0 {
			return Pos{File: s.file}
		}
		p = p[:i]
	}
}

// problems collects Problems and Warnings against one source.
type problems struct {
	src      *source
	list     []Problem
	warnings []Warning
}

func (ps *problems) add(path, hint, format string, args ...any) {
	ps.list = append(ps.list, Problem{Pos: ps.src.posOf(path), Path: path, Message: fmt.Sprintf(format, args...), Hint: hint})
}

func (ps *problems) warn(path, format string, args ...any) {
	ps.warnings = append(ps.warnings, Warning{Pos: ps.src.posOf(path), Path: path, Message: fmt.Sprintf(format, args...)})
}

func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	sort.SliceStable(ps.list, func(i, j int) bool {
		if ps.list[i].cause != ps.list[j].cause {
			return ps.list[i].cause
		}
		a, b := ps.list[i].Pos, ps.list[j].Pos
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	return &Error{Problems: ps.list}
}

// didYouMean suggests the candidate closest to got, or "" when none is close
// enough to be a likely typo.
func didYouMean(got string, candidates []string) string {
	best := suggest.Closest(got, candidates)
	if best == "" {
		return ""
	}
	return fmt.Sprintf("did you mean %q?", best)
}

// fieldPath helpers keep path spelling identical between decoding (which
// records positions) and validation (which looks them up).
func child(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

func index(parent string, i int) string { return fmt.Sprintf("%s[%d]", parent, i) }

func key(parent, k string) string {
	if k != "" && strings.IndexFunc(k, func(r rune) bool {
		return !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return child(parent, k)
	}
	return fmt.Sprintf("%s[%q]", parent, k)
}
