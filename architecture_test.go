package kubexm_test

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// maxFuncLines bounds a function of the interpreter and the CLI: a longer
// one is split into named steps.
const maxFuncLines = 80

const (
	figuresBegin = "<!-- figures: written by TestArchitectureFigures (KUBEXM_UPDATE_ARCH=1 go test -run TestArchitectureFigures .) -->"
	figuresEnd   = "<!-- end of figures -->"
)

// goFile is one non-test Go file: its package directory, lines and
// functions.
type goFile struct {
	dir   string
	lines int
	funcs []longFunc
}

type longFunc struct {
	where string
	name  string
	lines int
}

// measure reads every non-test Go file of the module.
func measure(t *testing.T) []goFile {
	t.Helper()
	var out []goFile
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, p, src, 0)
		if err != nil {
			return err
		}
		gf := goFile{dir: filepath.ToSlash(filepath.Dir(p)), lines: bytes.Count(src, []byte("\n"))}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
			gf.funcs = append(gf.funcs, longFunc{where: fmt.Sprintf("%s:%d", filepath.ToSlash(p), start.Line), name: funcName(fd), lines: end.Line - start.Line + 1})
		}
		out = append(out, gf)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	if ix, ok := typ.(*ast.IndexExpr); ok {
		typ = ix.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// figures is the block docs/architecture.md shows: the largest packages,
// cmd/kubexm, and the functions of engine/ and cmd/ over maxFuncLines.
func figures(files []goFile) (block string, pkgLines map[string]int, long []longFunc) {
	pkgLines = map[string]int{}
	for _, f := range files {
		pkgLines[f.dir] += f.lines
		if f.dir == "engine" || strings.HasPrefix(f.dir, "engine/") || f.dir == "cmd" || strings.HasPrefix(f.dir, "cmd/") {
			for _, fn := range f.funcs {
				if fn.lines > maxFuncLines {
					long = append(long, fn)
				}
			}
		}
	}
	pkgs := make([]string, 0, len(pkgLines))
	for p := range pkgLines {
		pkgs = append(pkgs, p)
	}
	slices.SortFunc(pkgs, func(a, b string) int {
		if pkgLines[a] != pkgLines[b] {
			return pkgLines[b] - pkgLines[a]
		}
		return strings.Compare(a, b)
	})
	shown := pkgs[:min(6, len(pkgs))]
	if !slices.Contains(shown, "cmd/kubexm") {
		shown = append(shown, "cmd/kubexm")
	}
	var b strings.Builder
	b.WriteString(figuresBegin + "\n")
	b.WriteString("| package | lines of non-test Go |\n|---|---|\n")
	for _, p := range shown {
		fmt.Fprintf(&b, "| `%s` | %d |\n", p, pkgLines[p])
	}
	fmt.Fprintf(&b, "\nNon-test Go under `cmd/` (all its packages): %d lines\n", cmdLines(pkgLines))
	fmt.Fprintf(&b, "\nFunctions over %d lines in `engine/` and `cmd/`: %d", maxFuncLines, len(long))
	for _, fn := range long {
		fmt.Fprintf(&b, "\n- `%s` (%s, %d lines)", fn.name, fn.where, fn.lines)
	}
	b.WriteString("\n" + figuresEnd)
	return b.String(), pkgLines, long
}

var figureRow = regexp.MustCompile("(?m)^\\| `([^`]+)` \\| (\\d+) \\|$")

// cmdRow is the figures' line of cmd/ as a whole: issue 48 asks for the
// command line's packages together (flags and printing) to stay small,
// which the binary's own package (cmd/kubexm) alone does not show.
var cmdRow = regexp.MustCompile("(?m)^Non-test Go under `cmd/` \\(all its packages\\): (\\d+) lines$")

// cmdLines is the non-test lines of every package under cmd/.
func cmdLines(pkgLines map[string]int) int {
	n := 0
	for p, l := range pkgLines {
		if p == "cmd" || strings.HasPrefix(p, "cmd/") {
			n += l
		}
	}
	return n
}

// offByATenth reports whether a figure the page shows is more than a
// tenth off the measured one.
func offByATenth(shown, got int) bool {
	diff := shown - got
	return diff*10 > got || -diff*10 > got
}

// TestArchitectureFigures keeps docs/architecture.md's figures measured:
// no function of engine/ or cmd/ is over maxFuncLines, and each package's
// size in the page is within a tenth of what it is (so that ordinary
// changes need not rewrite the page, and a restructuring does).
// KUBEXM_UPDATE_ARCH=1 rewrites the figures.
func TestArchitectureFigures(t *testing.T) {
	block, pkgLines, long := figures(measure(t))
	for _, fn := range long {
		t.Errorf("%s: %s is %d lines; split it into named steps of at most %d", fn.where, fn.name, fn.lines, maxFuncLines)
	}
	const doc = "docs/architecture.md"
	data, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	i, j := strings.Index(text, figuresBegin), strings.Index(text, figuresEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no figures block (%s ... %s)", doc, figuresBegin, figuresEnd)
	}
	if os.Getenv("KUBEXM_UPDATE_ARCH") == "1" {
		text = text[:i] + block + text[j+len(figuresEnd):]
		if err := os.WriteFile(doc, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	shown := figureRow.FindAllStringSubmatch(text[i:j], -1)
	if len(shown) == 0 {
		t.Errorf("%s: the figures block lists no package", doc)
	}
	for _, m := range shown {
		n, _ := strconv.Atoi(m[2])
		got := pkgLines[m[1]]
		if offByATenth(n, got) {
			t.Errorf("%s says %s has %d lines; it has %d: KUBEXM_UPDATE_ARCH=1 go test -run TestArchitectureFigures . rewrites the figures", doc, m[1], n, got)
		}
	}
	m := cmdRow.FindStringSubmatch(text[i:j])
	if m == nil {
		t.Errorf("%s: the figures block has no line for cmd/ as a whole", doc)
	} else if n, _ := strconv.Atoi(m[1]); offByATenth(n, cmdLines(pkgLines)) {
		t.Errorf("%s says cmd/ has %d lines; it has %d: KUBEXM_UPDATE_ARCH=1 go test -run TestArchitectureFigures . rewrites the figures", doc, n, cmdLines(pkgLines))
	}
}
