package eval

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"text/template"

	"github.com/Masterminds/sprig/v3"
)

// TestTemplateBombsRefused: every function that can make much more than it
// is given refuses before allocating, with an error naming it and matching
// ErrLimit, and the rendered text is bounded as a whole.
func TestTemplateBombsRefused(t *testing.T) {
	e := New()
	bombs := map[string]string{
		`{{ repeat 2000000000 "x" }}`:            "repeat: would make 2000000000 bytes",
		`a{{ repeat 2000000000 "x" }}`:           "repeat: would make",
		`{{ indent 2000000000 "a" }}`:            "indent: would make",
		`{{ nindent 20000 (repeat 2000 "\n") }}`: "nindent: would make",
		`{{ until 2000000000 }}`:                 "until: would make 2000000000 items",
		`{{ untilStep 0 2000000000 1 }}`:         "untilStep: would make",
		`{{ seq 1 100000000 }}`:                  "seq: would make",
		`{{ printf "%999999d%999999d%999999d%999999d%999999d%999999d%999999d%999999d%999999d%999999d%999999d%999999d%999999d%999999d%999999d%999999d%999999d" 1 }}`: "printf: would make",
		`{{ randAlpha 2000000000 }}`:                                                             "randAlpha: would make",
		`{{ replace "" (repeat 1000 "y") (repeat 100000 "x") }}`:                                 "replace: would make",
		`{{ regexReplaceAll "" (repeat 100000 "x") (repeat 1000 "y") }}`:                         "regexReplaceAll: would make",
		`{{ wrapWith 1 (repeat 1000 "y") (repeat 100000 "x") }}`:                                 "wrapWith: would make",
		`{{ splitList "" (repeat 2000000 "x") }}`:                                                "splitList: would make",
		`{{ $x := "ab" }}{{ range until 100 }}{{ $x = print $x $x }}{{ end }}`:                   "print: ",
		`{{ $x := "ab" }}{{ range until 100 }}{{ $x = printf "%s%s" $x $x }}{{ end }}`:           "printf: ",
		`{{ $l := list 1 }}{{ range until 100 }}{{ $l = concat $l $l }}{{ end }}`:                "concat: would make",
		`{{ $l := list 1 }}{{ range until 100 }}{{ $l = list $l $l }}{{ end }}{{ toJson $l }}`:   "toJson: a value of more than",
		`{{ $l := list 1 }}{{ range until 100 }}{{ $l = list $l $l }}{{ end }}{{ $l }}`:          "output: a value of more than",
		`{{ $l := list 1 }}{{ range until 100 }}{{ $l = list $l $l }}{{ end }}{{ join "," $l }}`: "join: ",
		`{{ $l := list 1 }}{{ range until 100 }}{{ $l = list $l $l }}{{ end }}{{ toYaml $l }}`:   "toYaml: ",
		`{{ $l := list 1 }}{{ range until 100 }}{{ $l = list $l $l }}{{ end }}{{ deepCopy $l }}`: "deepCopy: ",
		`{{ $d := dict }}{{ $_ := set $d "me" $d }}{{ toJson $d }}`:                              "nested deeper than 1000 levels",
		`{{ $d := dict }}{{ $_ := set $d "me" $d }}{{ print $d }}`:                               "nested deeper than 1000 levels",
		`{{ $s := repeat 10000000 "x" }}{{ $s }}{{ $s }}`:                                        "the rendered text would exceed 16 MiB",
		`{{ range until 3 }}{{ repeat 10000000 "x" }}{{ end }}`:                                  "the rendered text would exceed 16 MiB",
	}
	for src, want := range bombs {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		v, err := e.Render(src, map[string]any{})
		runtime.ReadMemStats(&after)
		if err == nil || !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %.40v, %v; want an ErrLimit saying %q", src, v, err, want)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 200<<20 {
			t.Errorf("%s: allocated %d MiB before refusing", src, alloc>>20)
		}
	}
}

// TestBoundedFunctionsUnchanged: within the bounds, the bounded versions
// give what sprig's and text/template's own give.
func TestBoundedFunctionsUnchanged(t *testing.T) {
	e := New()
	cases := []string{
		`{{ repeat 3 "ab" }}`, `{{ "a\nb" | indent 2 }}`, `{{ "a\nb" | nindent 2 }}`, `{{ "" | indent 1 }}`,
		`{{ until 3 }}`, `{{ until -2 }}`, `{{ until 0 }}`, `{{ untilStep 1 10 4 }}`, `{{ untilStep 5 0 -2 }}`, `{{ untilStep 5 0 2 }}`,
		`{{ seq 3 }}|{{ seq 2 4 }}|{{ seq 0 -2 }}|{{ seq 1 2 6 }}|{{ seq 6 -2 1 }}|{{ seq 1 2 -3 }}|{{ seq }}|{{ seq 1 }}|{{ seq 0 }}|{{ seq 1 1 }}`,
		`{{ printf "%5d|%-3s|%.2f|%[1]d|%*d" 7 "x" 1.234 4 2 }}`, `{{ printf "%s" (list 1 "a") }}`,
		`{{ replace "a" "bb" "aca" }}`, `{{ replace "" "-" "ab" }}`,
		`{{ regexReplaceAll "a(x*)b" "-ab-axxb-" "${1}W" }}`, `{{ regexReplaceAllLiteral "a" "aba" "$1" }}`,
		`{{ regexSplit "," "a,b,c" -1 }}`, `{{ regexFindAll "[ab]" "xaxb" 1 }}`, `{{ wrapWith 2 "|" "abcdef" }}`,
		`{{ splitList "," "a,b" | join "+" }}`, `{{ split "," "a,b" }}`, `{{ list 1 2 | concat (list 3) | toJson }}`,
		`{{ $d := dict }}{{ $_ := set $d "k" 1 }}{{ toJson $d }}`,
		`{{ print 1 "a" }}{{ println "b" }}{{ cat "c" "d" }}{{ quote "q" 1 }}{{ squote "r" }}`,
		`{{ html "<a>" }}{{ js "'" }}{{ urlquery "a b" }}`, `{{ list "a" | append (list 1) | len }}`,
		`{{ prepend (list 1) 0 }}`, `{{ toString (list 1) }}`, `{{ toPrettyJson (dict "a" 1) }}`, `{{ deepCopy (dict "a" (list 1)) }}`,
	}
	for _, src := range cases {
		want := new(strings.Builder)
		tm, err := template.New("t").Funcs(sprig.TxtFuncMap()).Parse(src)
		if err == nil {
			err = tm.Execute(want, nil)
		}
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		got, err := e.RenderString(src, map[string]any{})
		if err != nil || got != want.String() {
			t.Errorf("%s: %q, %v; want %q", src, got, err, want.String())
		}
	}
	if v, err := e.Render(`{{ until 2 }}`, nil); err != nil || len(v.([]int)) != 2 {
		t.Errorf("until keeps its type: %#v, %v", v, err)
	}
}
