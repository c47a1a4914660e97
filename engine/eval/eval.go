package eval

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"text/template"

	"github.com/expr-lang/expr"

	"github.com/mensylisir/kubexm/engine/eval/funcs"
)

// MaxOutput bounds the text of one rendered template and the string a
// template function returns (engine/eval/funcs).
const MaxOutput = funcs.MaxOutput

// ErrLimit is matched (errors.Is) by every error of a bound on what a
// template may make (engine/eval/funcs), so that the engine can tell a
// template bomb from a mistake.
var ErrLimit = funcs.ErrLimit

// cacheSize bounds each cache. A large playbook run has a few thousand
// distinct argument strings; beyond that, evicted entries are simply
// compiled again.
const cacheSize = 4096

// Evaluator renders {{ }} templates and evaluates expressions. It caches
// parsed templates and compiled expressions by their source text (bounded
// cache), and is safe for concurrent use.
type Evaluator struct {
	userFuncs     template.FuncMap // what a template may call
	internalFuncs template.FuncMap // what the rewritten parse trees call
	exprFuncs     []expr.Option

	templates *cache[*compiledTemplate]
	exprs     *cache[*compiledExpr]
	vms       sync.Pool // *vm.VM, reused between runs to save allocations

	// captures hands the typed value of a single-action template from the
	// capture function to Render; see (*Evaluator).capture.
	captures   sync.Map // uint64 -> any
	captureSeq atomic.Uint64
}

// New returns an Evaluator with the sprig and kubexm functions.
func New() *Evaluator {
	e := &Evaluator{
		templates: newCache[*compiledTemplate](cacheSize),
		exprs:     newCache[*compiledExpr](cacheSize),
	}
	e.userFuncs = templateFuncs()
	e.internalFuncs = template.FuncMap{
		fnField:     templateField(false, false),
		fnFieldOr:   templateField(true, false),
		fnFieldText: templateField(false, true),
		fnIndex:     templateIndex(false),
		fnIndexOr:   templateIndex(true),
		fnOut:       outValue,
		fnCapture:   e.capture,
	}
	e.exprFuncs = exprFunctions()
	return e
}

// Error is returned for every failure; the engine adds file:line, task and
// host.
type Error struct {
	Kind    string // "template" or "expression"
	Source  string
	Missing string // undefined variable path, e.g. "spec.etcd.typo"
	Err     error

	line   int    // line of Source where Missing was used
	detail string // Err rewritten for people: no internal names, one line
	hint   string // " (did you mean ...?)" or " (hint: ...)"
}

func (e *Error) Error() string {
	detail := e.detail
	if detail == "" && e.Err != nil {
		detail = e.Err.Error()
	}
	if e.Missing != "" {
		msg := fmt.Sprintf("undefined variable %q in %s %q", e.Missing, e.Kind, shorten(e.Source))
		if e.line > 0 && strings.Contains(e.Source, "\n") {
			msg += fmt.Sprintf(" at line %d", e.line)
		}
		return msg + e.hint
	}
	if e.hint != "" {
		detail += e.hint
	}
	return fmt.Sprintf("%s %q: %s", e.Kind, shorten(e.Source), detail)
}

func (e *Error) Unwrap() error { return e.Err }

// shorten keeps error messages to one readable line.
func shorten(s string) string {
	const limit = 100
	first, rest, multi := strings.Cut(s, "\n")
	if len(first) > limit {
		return first[:limit] + "..."
	}
	if multi && rest != "" {
		return first + "..."
	}
	return first
}
