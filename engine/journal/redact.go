package journal

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
)

// nestedDepth is how many escapings deep a secret is still recognised:
// templates compose them (`printf "%q" (toJson .pw)`, a JSON document holding
// a quoted YAML string holding the secret), and each level past the first
// changes every special character again.
const nestedDepth = 3

// stringEscapers are the ways a template or builtin rewrites the characters
// of a string inside a longer text (without the surrounding quotes, which do
// not touch the secret's own characters): JSON with and without HTML
// escaping, Go quoting (quote, %q), shell quoting inside '...' and "...",
// YAML single quotes, URL escaping. Each works character by character, so
// escaping the secret alone gives what appears inside the escaped whole.
var stringEscapers = []func(string) string{
	func(s string) string {
		var buf strings.Builder
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if enc.Encode(s) != nil {
			return s
		}
		return unquoteEnds(strings.TrimSuffix(buf.String(), "\n"))
	},
	func(s string) string {
		j, err := json.Marshal(s)
		if err != nil {
			return s
		}
		return unquoteEnds(string(j))
	},
	func(s string) string { return unquoteEnds(strconv.Quote(s)) },
	func(s string) string { return unquoteEnds(strconv.QuoteToASCII(s)) },
	func(s string) string { return strings.ReplaceAll(s, "'", `'\''`) },
	func(s string) string { return strings.ReplaceAll(s, "'", `'"'"'`) },
	func(s string) string { return strings.ReplaceAll(s, "'", "''") },
	strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", `\$`, "`", "\\`").Replace,
	url.QueryEscape,
	url.PathEscape,
}

func unquoteEnds(q string) string { return q[1 : len(q)-1] }

// nestedForms lists a secret escaped two or three times over by
// stringEscapers, and base64 (whole and inside longer text, as secretForms
// does for the secret itself) of each once-escaped form: `b64enc (toJson
// .pw)`. secretForms covers the secret as it is and escaped once; only
// escapings that change the text are followed, so a secret without special
// characters adds little.
func nestedForms(s string) []string {
	var out []string
	seen := map[string]bool{s: true}
	level := []string{s}
	for depth := 1; depth <= nestedDepth; depth++ {
		var next []string
		for _, f := range level {
			for _, esc := range stringEscapers {
				g := esc(f)
				if seen[g] {
					continue
				}
				seen[g] = true
				next = append(next, g)
				if depth > 1 {
					out = append(out, g)
				} else {
					out = append(out, base64Forms(g)...)
				}
			}
		}
		level = next
	}
	return out
}

// base64Forms is a text base64-encoded, and the part of its encoding that
// stays the same wherever it starts inside a longer text (at least 8
// characters: shorter ones would mask unrelated text).
func base64Forms(s string) []string {
	var out []string
	for _, e := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		out = append(out, e.EncodeToString([]byte(s)))
		for k := range 3 {
			b := append(make([]byte, k), s...)
			full := e.EncodeToString(b)
			start, end := (8*k+5)/6, 8*len(b)/6
			if end-start >= 8 && end <= len(full) {
				out = append(out, full[start:end])
			}
		}
	}
	return out
}
