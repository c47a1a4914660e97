// Package yamlguard bounds a YAML text before it is parsed. The YAML parser
// takes time and memory that grow faster than the input with its nesting
// (20,000 levels in 40 KB took 14 s and 660 MB), so a file from an untrusted
// source (a cluster.yaml from a ticket, -e @vars.yaml, a host's reply) is
// measured with one linear scan first, and refused before the parser
// allocates anything.
package yamlguard

import (
	"fmt"
)

// Limits bound a YAML text.
type Limits struct {
	MaxBytes   int // the text's size
	MaxDepth   int // nesting of block and flow collections
	MaxAliases int // *alias references; each may expand to a whole subtree
}

// Default is what kubexm accepts in the files it reads: far above any
// real cluster.yaml, playbook or vars file, far below what hurts.
func Default() Limits { return Limits{MaxBytes: 16 << 20, MaxDepth: 100, MaxAliases: 10_000} }

// Error says which limit a text exceeds, and where.
type Error struct {
	Line, Col int
	Msg       string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return e.Msg
	}
	return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.Msg)
}

// Check scans data once and returns an *Error if it exceeds l. The nesting
// it measures is an estimate that never falls below half the real depth:
// each deeper indentation, each "- " or "? " that opens a collection on the
// same line, and each flow bracket counts one level. Quoted scalars,
// comments and block scalars (| and >) are skipped.
func Check(data []byte, l Limits) error {
	if l.MaxBytes > 0 && len(data) > l.MaxBytes {
		return &Error{Msg: fmt.Sprintf("YAML text of %d bytes is larger than the limit of %d", len(data), l.MaxBytes)}
	}
	s := scanner{data: data, l: l, line: 1}
	return s.run()
}

type scanner struct {
	data    []byte
	l       Limits
	i       int
	line    int
	lineAt  int   // offset of the current line's start
	indents []int // open block levels' indentation
	flow    int   // open flow brackets
	aliases int
}

func (s *scanner) fail(format string, args ...any) error {
	return &Error{Line: s.line, Col: s.i - s.lineAt + 1, Msg: fmt.Sprintf(format, args...)}
}

func (s *scanner) depthCheck(extra int) error {
	if d := len(s.indents) + s.flow + extra; s.l.MaxDepth > 0 && d > s.l.MaxDepth {
		return s.fail("YAML nested deeper than %d levels", s.l.MaxDepth)
	}
	return nil
}

func (s *scanner) newline() {
	s.i++
	s.line++
	s.lineAt = s.i
}

func (s *scanner) run() error {
	for s.i < len(s.data) {
		if err := s.lineStart(); err != nil {
			return err
		}
	}
	return nil
}

// lineStart handles one line in block context (or the continuation of a
// flow collection).
func (s *scanner) lineStart() error {
	indent := 0
	for s.i < len(s.data) && s.data[s.i] == ' ' {
		s.i++
		indent++
	}
	if s.i >= len(s.data) {
		return nil
	}
	switch s.data[s.i] {
	case '\n':
		s.newline()
		return nil
	case '#':
		s.skipLine()
		return nil
	}
	if s.flow == 0 {
		for len(s.indents) > 0 && s.indents[len(s.indents)-1] >= indent {
			s.indents = s.indents[:len(s.indents)-1]
		}
		s.indents = append(s.indents, indent)
		if err := s.depthCheck(0); err != nil {
			return err
		}
	}
	return s.rest(indent)
}

// rest scans the remainder of a line whose block indentation is indent.
func (s *scanner) rest(indent int) error {
	extra := 0       // "- " and "? " opening collections on this line
	tokStart := true // at the start of a value: brackets, quotes, aliases and | > count here
	for s.i < len(s.data) {
		c := s.data[s.i]
		switch {
		case c == '\n':
			s.newline()
			return nil
		case c == '\r', c == ' ', c == '\t':
			s.i++
			continue
		case c == '#' && (s.i == s.lineAt || s.data[s.i-1] == ' ' || s.data[s.i-1] == '\t'):
			s.skipLine()
			return nil
		case tokStart && s.flow == 0 && (c == '-' || c == '?') && s.spaceAfter():
			extra++
			if err := s.depthCheck(extra); err != nil {
				return err
			}
			s.i++
			continue
		case tokStart && (c == '"' || c == '\''):
			if err := s.quoted(c); err != nil {
				return err
			}
			tokStart = false
			continue
		case tokStart && s.flow == 0 && (c == '|' || c == '>'):
			s.skipLine()
			s.blockScalar(indent)
			return nil
		case tokStart && (c == '&' || c == '!'):
			// An anchor or a tag comes before the value it names.
			for s.i < len(s.data) && s.data[s.i] != ' ' && s.data[s.i] != '\n' {
				s.i++
			}
			continue
		case tokStart && c == '*':
			s.aliases++
			if s.l.MaxAliases > 0 && s.aliases > s.l.MaxAliases {
				return s.fail("more than %d YAML aliases", s.l.MaxAliases)
			}
		case (tokStart || s.flow > 0) && (c == '[' || c == '{'):
			s.flow++
			if err := s.depthCheck(extra); err != nil {
				return err
			}
			s.i++
			continue
		case s.flow > 0 && (c == ']' || c == '}'):
			s.flow--
			s.i++
			tokStart = false
			continue
		case s.flow > 0 && c == ',':
			s.i++
			tokStart = true
			continue
		case c == ':' && (s.spaceAfter() || s.flow > 0):
			s.i++
			tokStart = true
			continue
		}
		tokStart = false
		s.i++
	}
	return nil
}

// spaceAfter says whether the byte after the current one ends a token.
func (s *scanner) spaceAfter() bool {
	if s.i+1 >= len(s.data) {
		return true
	}
	switch s.data[s.i+1] {
	case ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

func (s *scanner) skipLine() {
	for s.i < len(s.data) && s.data[s.i] != '\n' {
		s.i++
	}
}

// quoted skips a quoted scalar, which may span lines.
func (s *scanner) quoted(q byte) error {
	s.i++
	for s.i < len(s.data) {
		c := s.data[s.i]
		switch {
		case c == '\n':
			s.newline()
			continue
		case q == '"' && c == '\\':
			s.i += 2
			continue
		case c == q:
			if q == '\'' && s.i+1 < len(s.data) && s.data[s.i+1] == '\'' {
				s.i += 2
				continue
			}
			s.i++
			return nil
		}
		s.i++
	}
	return nil // unterminated: the parser reports it
}

// blockScalar skips the lines of a | or > scalar: those indented more than
// the line that introduced it, and blank ones.
func (s *scanner) blockScalar(indent int) {
	for s.i < len(s.data) {
		if s.data[s.i] == '\n' {
			s.newline()
			continue
		}
		j, n := s.i, 0
		for j < len(s.data) && s.data[j] == ' ' {
			j++
			n++
		}
		if j < len(s.data) && s.data[j] != '\n' && n <= indent {
			return
		}
		s.i = j
		s.skipLine()
	}
}
