// Package journal is what a run leaves in its work directory: the journal
// of every outcome that --resume reads, the masking of secrets before
// anything is written or shown, and the runs a work directory holds
// (kubexm get runs, kubexm logs). It knows no other room of the engine.
package journal

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mensylisir/kubexm/engine/model"

	"github.com/mensylisir/kubexm/inventory"
)

// The journal is a JSON-lines file, runs/<run-id>/journal.jsonl under the
// work directory. Each line is written as it happens (one write per record,
// so a killed process loses nothing it reported) and the file is fsync'd at
// the end of every task, which keeps a 1000-host run from paying one fsync
// per host.

// File is the journal's name in its run's directory.
const File = "journal.jsonl"

// Record is one line of the journal.
type Record struct {
	Type string `json:"type"` // header, result, end
	Time string `json:"time,omitempty"`
	// header
	Run           string `json:"run,omitempty"`
	Playbook      string `json:"playbook,omitempty"`
	PlaybookHash  string `json:"playbook_hash,omitempty"`
	InventoryHash string `json:"inventory_hash,omitempty"`
	ResumedFrom   string `json:"resumed_from,omitempty"`
	// result
	Key      string         `json:"key,omitempty"`
	Task     string         `json:"task,omitempty"`
	Host     string         `json:"host,omitempty"`
	Status   model.Status   `json:"status,omitempty"`
	Register string         `json:"register,omitempty"`
	Result   map[string]any `json:"result,omitempty"`
	Facts    map[string]any `json:"facts,omitempty"`
	// Omitted is set when no_log kept the result out of the journal; such a
	// task runs again on resume if anything depends on its result.
	Omitted bool `json:"omitted,omitempty"`
	// Control is set when the task ran on the control machine or wrote to
	// it (localhost, delegate_to: localhost, a builtin whose product is
	// there: downloads, certificates, kubeconfigs, fetched files). A resume
	// by a process that may have another work directory (the new leader of
	// operator mode, in a new pod with an empty one) runs such a task again
	// (Reusable); kubexm's are idempotent and rebuild what is missing from
	// the bundle and the cluster's PKI on its masters.
	Control bool `json:"control,omitempty"`
	// Resumed marks a result copied from the run being resumed: the task
	// did not run again.
	Resumed bool `json:"resumed,omitempty"`
	// What `kubexm logs` shows after the terminal is gone: the task's place,
	// wall time and exit status, and for a task that did not succeed its
	// message (with the hint) and the last lines of its output. Text that
	// holds a secret is left out (Hidden), never written masked.
	Role       string `json:"role,omitempty"`
	Pos        string `json:"pos,omitempty"`
	DurationMS int64  `json:"duration_ms,omitempty"`
	RC         *int   `json:"rc,omitempty"`
	Message    string `json:"msg,omitempty"`
	StdoutTail string `json:"stdout_tail,omitempty"`
	StderrTail string `json:"stderr_tail,omitempty"`
	Hidden     bool   `json:"hidden,omitempty"`
	// end
	Outcome string `json:"outcome,omitempty"`
}

// Keep puts what a task registered (reg: nil when it registers nothing)
// and the facts it set into rec, for --resume to restore. A value that
// holds a secret is never journaled, not even masked: restoring "********"
// would write the mask into real files. Such a record is marked Omitted and
// the task runs again on resume, as under no_log.
func (rec *Record) Keep(reg, facts map[string]any, noLog bool, red *Masker) {
	if reg == nil && len(facts) == 0 {
		return
	}
	if noLog || red.Holds(reg) || red.Holds(facts) {
		rec.Omitted = true
		return
	}
	rec.Result = reg
	if len(facts) > 0 {
		rec.Facts = facts
	}
}

// Explain adds what `kubexm logs` shows to a result: the exit status of a
// command, and for a status other than ok, changed or skipped its message
// and the ends of its output (reg's). no_log hides them; so does a secret in
// them, since a journal never holds one, not even masked.
func (rec *Record) Explain(msg string, reg map[string]any, noLog bool, red *Masker) {
	if noLog {
		rec.Hidden = msg != "" || reg["stdout"] != nil
		return
	}
	if rc, ok := reg["rc"].(int); ok {
		rec.RC = &rc
	}
	switch rec.Status {
	case model.StatusOK, model.StatusChanged, model.StatusSkipped:
		return
	}
	stdout, _ := reg["stdout"].(string)
	stderr, _ := reg["stderr"].(string)
	if red.Holds(msg) || red.Holds(stdout) || red.Holds(stderr) {
		rec.Hidden = true
		return
	}
	rec.Message, rec.StdoutTail, rec.StderrTail = msg, LastLines(stdout, LogTailLines), LastLines(stderr, LogTailLines)
}

// Journal is an open journal a run appends to.
type Journal struct {
	mu   sync.Mutex
	Dir  string
	f    *os.File
	w    *bufio.Writer
	err  error
	Done map[string]Record // successful results of the run being resumed
	From string
	// RerunControl: the control side's results are not taken (Reusable).
	RerunControl bool
}

// NewRunID returns a sortable, unique run id.
func NewRunID(now time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102-150405.000") + "-" + hex.EncodeToString(b[:])
}

// InventoryHash identifies an inventory for resume. Secrets take no part:
// an unsalted hash over a password lets anyone who reads the journal test
// guesses against it, and a changed password changes nothing a resumed run
// would skip.
func InventoryHash(inv *inventory.Inventory, red *Masker) string {
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	// Encoding errors cannot happen for these plain types except for
	// unsupported values in Vars, which then simply hash as their error.
	if err := enc.Encode(struct {
		Hosts  []inventory.Host
		Groups map[string][]string
		GV     map[string]map[string]any
		Vars   map[string]any
	}{inv.Hosts, inv.Groups, inv.GroupVars, inv.Vars}); err != nil {
		buf.WriteString(err.Error())
	}
	sum := sha256.Sum256([]byte(red.Str(buf.String())))
	return hex.EncodeToString(sum[:])
}

func runsDir(workDir string) string { return filepath.Join(workDir, "runs") }

// LastRun returns the newest run id under workDir.
func LastRun(workDir string) (string, error) { return lastRun(workDir, "") }

// LastRunOf returns the newest run of playbook under workDir: what a bare
// --resume continues, so that a run of another playbook in between (an
// ad-hoc command looking at the hosts) does not hide it.
func LastRunOf(workDir, playbook string) (string, error) { return lastRun(workDir, playbook) }

// lastRun returns the newest run under workDir, of playbook unless it is "".
func lastRun(workDir, playbook string) (string, error) {
	of := ""
	if playbook != "" {
		of = " of playbook " + playbook
	}
	ents, err := os.ReadDir(runsDir(workDir))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("no earlier run%s to resume in %s", of, runsDir(workDir))
		}
		return "", err
	}
	// The newest journal is the one written last: run ids made within the
	// same second do not sort by time.
	best, bestTime := "", time.Time{}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		path := filepath.Join(runsDir(workDir), e.Name(), File)
		st, err := os.Stat(path)
		if err != nil {
			continue
		}
		if playbook != "" {
			if ri, ok := readRunInfo(path); !ok || ri.Playbook != playbook {
				continue
			}
		}
		if best == "" || st.ModTime().After(bestTime) || (st.ModTime().Equal(bestTime) && e.Name() > best) {
			best, bestTime = e.Name(), st.ModTime()
		}
	}
	if best == "" {
		return "", fmt.Errorf("no earlier run%s to resume in %s", of, runsDir(workDir))
	}
	return best, nil
}

// ErrOtherRun says that an earlier run's journal is of another playbook,
// another version of it or another inventory: resuming it could skip tasks
// that are now different. Read's refusals match it.
var ErrOtherRun = errors.New("the journal is of another playbook or inventory")

type otherRunError struct{ msg string }

func (e otherRunError) Error() string      { return e.msg }
func (otherRunError) Is(target error) bool { return target == ErrOtherRun }

// Read reads an earlier run and checks it belongs to the same
// playbook and inventory.
func Read(workDir, id, pbName, pbHash, invHash string) (map[string]Record, error) {
	path := filepath.Join(runsDir(workDir), id, File)
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("resume: no run %q in %s", id, runsDir(workDir))
		}
		return nil, fmt.Errorf("resume: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	done := map[string]Record{}
	line := 0
	header := false
	for sc.Scan() {
		line++
		var rec Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			// The last line of a killed run may be cut short.
			continue
		}
		switch rec.Type {
		case "header":
			header = true
			if rec.Playbook != pbName {
				return nil, otherRunError{fmt.Sprintf("resume: run %s is a run of playbook %q, not %q; resume it with that playbook, or start a new run without --resume", id, rec.Playbook, pbName)}
			}
			if rec.PlaybookHash != pbHash {
				return nil, otherRunError{fmt.Sprintf("resume: run %s was made with another version of playbook %q (its files changed since); resuming it could skip tasks that are now different. Start a new run without --resume", id, rec.Playbook)}
			}
			if rec.InventoryHash != invHash {
				return nil, otherRunError{fmt.Sprintf("resume: run %s was made with another inventory (hosts or variables changed since); start a new run without --resume", id)}
			}
		case "result":
			if rec.Status == model.StatusOK || rec.Status == model.StatusChanged || rec.Status == model.StatusSkipped {
				done[rec.Key] = rec
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("resume: reading %s: %w", path, err)
	}
	if !header {
		return nil, fmt.Errorf("resume: %s has no header; it is not a kubexm run journal", path)
	}
	return done, nil
}

// Open creates the journal of run id under workDir and writes its header.
func Open(workDir, id string, hdr Record) (*Journal, error) {
	dir := filepath.Join(runsDir(workDir), id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, File), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	j := &Journal{Dir: dir, f: f, w: bufio.NewWriterSize(f, 64*1024)}
	hdr.Type = "header"
	j.Write(hdr)
	j.Sync()
	return j, j.err
}

func (j *Journal) Write(rec Record) {
	if j == nil {
		return
	}
	rec.Time = time.Now().UTC().Format(time.RFC3339Nano)
	data, err := json.Marshal(rec)
	if err != nil {
		// Results hold plain YAML/JSON values; anything else is dropped
		// rather than losing the record.
		rec.Result, rec.Facts, rec.Omitted = nil, nil, true
		data, err = json.Marshal(rec)
		if err != nil {
			return
		}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return
	}
	j.w.Write(data)
	j.w.WriteByte('\n')
	j.err = j.w.Flush()
}

// Sync makes everything written so far durable.
func (j *Journal) Sync() {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err == nil {
		j.err = j.w.Flush()
	}
	if j.err == nil {
		j.err = j.f.Sync()
	}
}

func (j *Journal) Close(outcome string) error {
	if j == nil {
		return nil
	}
	j.Write(Record{Type: "end", Outcome: outcome})
	j.Sync()
	cerr := j.f.Close()
	if j.err != nil {
		return fmt.Errorf("journal %s: %w", j.Dir, j.err)
	}
	return cerr
}

// Lookup returns the earlier outcome of key, if it succeeded and a resumed
// run may take it instead of running the task again (Reusable).
func (j *Journal) Lookup(key string) (Record, bool) {
	if j == nil || j.Done == nil {
		return Record{}, false
	}
	rec, ok := j.Done[key]
	if !ok || !Reusable(rec, j.RerunControl) {
		return Record{}, false
	}
	return rec, true
}

// Reusable is the resume decision for one journaled outcome: a task that
// finished on its host (ok, changed or skipped) is taken from the journal;
// one whose result no_log kept out (Omitted) runs again, and so does, with
// rerunControl, one whose product is on the control machine (Control):
// the host's state survives the interruption, the control machine's work
// directory may not be the one the run had (operator mode's new leader),
// and the control side's tasks are idempotent. Without rerunControl (the
// CLI's --resume, the server's job retried in the same work directory)
// those are taken from the journal too: a playbook's localhost task need
// not be idempotent.
func Reusable(rec Record, rerunControl bool) bool {
	switch rec.Status {
	case model.StatusOK, model.StatusChanged, model.StatusSkipped:
	default:
		return false
	}
	return !rec.Omitted && (!rec.Control || !rerunControl)
}

// Masker masks secrets in text and values.
type Masker struct {
	r *strings.Replacer
}

// Mask is what a secret is replaced with.
const Mask = "********"

// NewMasker returns the masker of secrets and of their escaped, quoted and
// encoded forms.
func NewMasker(secrets []string) *Masker {
	var pairs []string
	seen := map[string]bool{}
	add := func(form, masked string) {
		if form != "" && !seen[form] {
			seen[form] = true
			pairs = append(pairs, form, masked)
		}
	}
	var truncated []string
	for _, s := range secrets {
		if s == "" {
			continue
		}
		for _, f := range secretForms(s) {
			add(f, Mask)
			// Messages are cut short after a prefix ("PlainS3..."): a
			// prefix of a secret followed by an ellipsis is masked too.
			for n := 2; n < len(f); n++ {
				for _, ell := range []string{"...", " ...", "…"} {
					truncated = append(truncated, f[:n]+ell, Mask+ell)
				}
			}
		}
	}
	for i := 0; i < len(truncated); i += 2 {
		add(truncated[i], truncated[i+1])
	}
	for _, s := range secrets {
		if s != "" {
			for _, f := range nestedForms(s) {
				add(f, Mask)
			}
		}
	}
	if len(pairs) == 0 {
		return &Masker{}
	}
	// The replacer takes the first pair that matches at a position: longer
	// forms first, so a secret that contains another is masked whole.
	type pair struct{ from, to string }
	ps := make([]pair, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		ps = append(ps, pair{pairs[i], pairs[i+1]})
	}
	sort.SliceStable(ps, func(i, j int) bool { return len(ps[i].from) > len(ps[j].from) })
	pairs = pairs[:0]
	for _, p := range ps {
		pairs = append(pairs, p.from, p.to)
	}
	return &Masker{r: strings.NewReplacer(pairs...)}
}

// secretForms lists the ways a secret can appear in what kubexm emits: as
// it is, escaped inside JSON, TOML, YAML or Go strings (toJson, quote),
// shell-quoted, URL-escaped and base64-encoded (b64enc, also inside a longer
// base64 text, at each of the three byte alignments).
func secretForms(s string) []string {
	forms := []string{s}
	for _, esc := range stringEscapers {
		forms = append(forms, esc(s))
	}
	return append(forms, base64Forms(s)...)
}

func (rd *Masker) Str(s string) string {
	if rd.r == nil || s == "" {
		return s
	}
	return rd.r.Replace(s)
}

// Holds says whether a secret appears anywhere in v.
func (rd *Masker) Holds(v any) bool {
	if rd.r == nil {
		return false
	}
	switch x := v.(type) {
	case string:
		return rd.r.Replace(x) != x
	case map[string]any:
		for k, e := range x {
			if rd.Holds(k) || rd.Holds(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if rd.Holds(e) {
				return true
			}
		}
	case []string:
		for _, e := range x {
			if rd.Holds(e) {
				return true
			}
		}
	case nil, bool, int, int64, float64:
	default:
		// Any other value is judged by how it prints.
		return rd.Holds(fmt.Sprint(x))
	}
	return false
}
