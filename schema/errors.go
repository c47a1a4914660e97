package schema

import (
	"fmt"
	"io"
	"sort"
	"strings"

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

// WriteWarnings writes each warning on a line of its own, as the commands
// reading a cluster file tell them (on standard error, beside what they
// print).
func WriteWarnings(w io.Writer, warnings []Warning) {
	for _, x := range warnings {
		fmt.Fprintf(w, "warning: %s\n", x)
	}
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

// Problems collects the problems and warnings of one cluster file against
// its positions: decoding and validation (schema/validate) report through
// it.
type Problems struct {
	src      *source
	List     []Problem
	Warnings []Warning
}

// NewProblems is a collector at the positions of the file c came from.
func (c *Cluster) NewProblems() *Problems { return &Problems{src: c.src} }

// Fresh is an empty collector at the same file's positions.
func (ps *Problems) Fresh() *Problems { return &Problems{src: ps.src} }

// Add records a problem at path.
func (ps *Problems) Add(path, hint, format string, args ...any) {
	ps.List = append(ps.List, Problem{Pos: ps.src.posOf(path), Path: path, Message: fmt.Sprintf(format, args...), Hint: hint})
}

// Warn records a warning at path.
func (ps *Problems) Warn(path, format string, args ...any) {
	ps.Warnings = append(ps.Warnings, Warning{Pos: ps.src.posOf(path), Path: path, Message: fmt.Sprintf(format, args...)})
}

// Err is the problems as an *Error (causes first, then in file order),
// or nil.
func (ps *Problems) Err() error {
	if len(ps.List) == 0 {
		return nil
	}
	sort.SliceStable(ps.List, func(i, j int) bool {
		if ps.List[i].cause != ps.List[j].cause {
			return ps.List[i].cause
		}
		a, b := ps.List[i].Pos, ps.List[j].Pos
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	return &Error{Problems: ps.List}
}

// PosOf is where path was written, or its nearest written parent.
func (ps *Problems) PosOf(path string) Pos { return ps.src.posOf(path) }

// SetPos records that path was written at pos (a value expanded from
// another, such as a host range's names).
func (ps *Problems) SetPos(path string, pos Pos) { ps.src.pos[path] = pos }

// Finish adds to what decoding found (decoded) the problems of later that
// are not under the path of one of failed (consequences of those), and
// returns the warnings of both and the problems as an error. Decoding's
// problems are causes: they are listed first.
func (decoded *Problems) Finish(later *Problems, failed []Problem) ([]Warning, error) {
	for i := range decoded.List {
		decoded.List[i].cause = true
	}
	for _, p := range later.List {
		if !underAny(p.Path, failed) {
			decoded.List = append(decoded.List, p)
		}
	}
	decoded.Warnings = append(decoded.Warnings, later.Warnings...)
	return decoded.Warnings, decoded.Err()
}

func underAny(path string, list []Problem) bool {
	for _, p := range list {
		if path == p.Path || strings.HasPrefix(path, p.Path+".") || strings.HasPrefix(path, p.Path+"[") {
			return true
		}
	}
	return false
}
