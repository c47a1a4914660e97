package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mensylisir/kubexm/engine/journal"
	"github.com/mensylisir/kubexm/engine/model"
)

// TestSecretsMaskedWhenEscapedTwice: issue 45 found `printf "%q" (toJson
// .pw)` printed the password; every composition of two or three escapings
// a template can write is masked, as the single ones are.
func TestSecretsMaskedWhenEscapedTwice(t *testing.T) {
	const pw = "Reg\"Pw\\S3cr3t'x$<y>"
	msgs := []string{
		`{{ printf "%q" (toJson .pw) }}`,
		`{{ toJson (toJson .pw) }}`,
		`{{ toJson (quote .pw) }}`,
		`{{ quote (quote (toJson .pw)) }}`,
		`{{ toJson (dict "doc" (toJson (dict "password" .pw))) }}`,
		`{{ toYaml (dict "a" (toJson .pw)) }}`,
		`{{ toJson .pw | shquote }}`,
		`{{ toJson .pw | urlquery }}`,
		`{{ b64enc (toJson .pw) }}`,
		`{{ printf "x-%s-y" (quote .pw) | b64enc }}`,
		`{{ printf "%q" (printf "%q" .pw) }}`,
	}
	var tasks strings.Builder
	for i, m := range msgs {
		fmt.Fprintf(&tasks, "    - name: form %d\n      probe: {id: f%d, msg: %s}\n", i, i, strconvQuoteYAML(m))
	}
	dir := writeFiles(t, map[string]string{"playbook.yaml": "- hosts: h1\n  tasks:\n" + tasks.String()})
	c := &calls{}
	pb, err := Load(context.Background(), dir, LoadOptions{Builtins: testRegistry(c)})
	if err != nil {
		t.Fatal(err)
	}
	inv := testInventory()
	inv.OtherSecrets = []string{pw}
	var events []model.Event
	var mu sync.Mutex
	_, err = Run(context.Background(), pb, inv, RunOptions{Verbosity: 2, ExtraVars: map[string]any{"pw": pw},
		Output: model.SinkFunc(func(e model.Event) { mu.Lock(); events = append(events, e); mu.Unlock() })})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, e := range events {
		b, _ := json.Marshal(e)
		fmt.Fprintf(&text, "%s\n%s|%s|%s\n", b, e.Task, e.Message, e.Stdout)
	}
	// The probe's calls are the rendered messages themselves, unmasked:
	// each must hold the secret in the form it tests, or the test proves
	// nothing.
	calls := strings.Join(c.sorted(), "\n")
	if n := strings.Count(calls, "S3cr3t"); n != len(msgs)-2 {
		t.Errorf("%d of the rendered forms hold the secret's text, want all but the two base64 ones:\n%s", n, calls)
	}
	for _, leak := range []string{"S3cr3t", "UmVnXCJQd1xcUzNjcjN0J3gkPHk-XCI", "UmVnXCJQd1xcUzNjcjN0J3gkPHk+XCI"} {
		if strings.Contains(text.String(), leak) {
			t.Errorf("%q leaks:\n%s", leak, text.String())
		}
	}
	if n := strings.Count(text.String(), journal.Mask); n < len(msgs) {
		t.Errorf("masked %d times, want at least %d:\n%s", n, len(msgs), text.String())
	}
}

func strconvQuoteYAML(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
