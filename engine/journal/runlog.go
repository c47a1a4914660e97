package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/engine/model"
)

// RunInfo is what a run's journal says about the run as a whole.
type RunInfo struct {
	ID          string
	Playbook    string
	Start       time.Time
	End         time.Time // zero when the journal has no end: running, or killed
	Outcome     string    // ok, failed, cancelled; "" without an end
	ResumedFrom string
}

// Runs lists the runs journaled in workDir, oldest first. A journal whose
// header cannot be read is left out.
func Runs(workDir string) ([]RunInfo, error) {
	ents, err := os.ReadDir(runsDir(workDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []RunInfo
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if ri, ok := readRunInfo(filepath.Join(runsDir(workDir), e.Name(), File)); ok {
			ri.ID = e.Name()
			out = append(out, ri)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out, nil
}

// readRunInfo reads the header (the first line) and the end record (the
// last line) of a journal, without reading the results between them.
func readRunInfo(path string) (RunInfo, bool) {
	f, err := os.Open(path)
	if err != nil {
		return RunInfo{}, false
	}
	defer f.Close()
	var ri RunInfo
	line, err := bufio.NewReader(f).ReadBytes('\n')
	var hdr Record
	if (err != nil && len(line) == 0) || json.Unmarshal(line, &hdr) != nil || hdr.Type != "header" {
		return RunInfo{}, false
	}
	ri.Playbook, ri.ResumedFrom = hdr.Playbook, hdr.ResumedFrom
	ri.Start, _ = time.Parse(time.RFC3339Nano, hdr.Time)
	// The end record is short: it is in the file's last few hundred bytes.
	st, err := f.Stat()
	if err != nil {
		return ri, true
	}
	off := max(st.Size()-512, 0)
	tail := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(tail, off); err != nil && !errors.Is(err, io.EOF) {
		return ri, true
	}
	tail = bytes.TrimRight(tail, "\n")
	last := tail[bytes.LastIndexByte(tail, '\n')+1:]
	var end Record
	if json.Unmarshal(last, &end) == nil && end.Type == "end" {
		ri.Outcome = end.Outcome
		ri.End, _ = time.Parse(time.RFC3339Nano, end.Time)
	}
	return ri, true
}

// LogEntry is one task on one host as a run's journal keeps it.
type LogEntry struct {
	Time       time.Time    `json:"time"`
	Host       string       `json:"host"`
	Role       string       `json:"role,omitempty"`
	Task       string       `json:"task"`
	Pos        string       `json:"pos,omitempty"`
	Status     model.Status `json:"status"`
	DurationMS int64        `json:"duration_ms"`
	RC         *int         `json:"rc,omitempty"`
	Message    string       `json:"msg,omitempty"`
	StdoutTail string       `json:"stdout_tail,omitempty"`
	StderrTail string       `json:"stderr_tail,omitempty"`
	// Hidden: the task's output held a secret or was no_log, so the journal
	// keeps none of it.
	Hidden bool `json:"hidden,omitempty"`
}

// RunLog reads the journal of run id in workDir ("last": the newest run).
func RunLog(workDir, id string) (RunInfo, []LogEntry, error) {
	if id == "last" {
		var err error
		if id, err = LastRun(workDir); err != nil {
			return RunInfo{}, nil, err
		}
	}
	if id == "" || id != filepath.Base(id) || id == "." || id == ".." {
		return RunInfo{}, nil, fmt.Errorf("%q is not a run id (kubexm get runs lists them)", id)
	}
	path := filepath.Join(runsDir(workDir), id, File)
	ri, ok := readRunInfo(path)
	if !ok {
		return RunInfo{}, nil, fmt.Errorf("no run %s in %s (kubexm get runs lists them)", id, runsDir(workDir))
	}
	ri.ID = id
	f, err := os.Open(path)
	if err != nil {
		return ri, nil, err
	}
	defer f.Close()
	var out []LogEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var rec Record
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec.Type != "result" {
			continue
		}
		e := LogEntry{Host: rec.Host, Role: rec.Role, Task: rec.Task, Pos: rec.Pos, Status: rec.Status, DurationMS: rec.DurationMS,
			RC: rec.RC, Message: rec.Message, StdoutTail: rec.StdoutTail, StderrTail: rec.StderrTail, Hidden: rec.Hidden}
		e.Time, _ = time.Parse(time.RFC3339Nano, rec.Time)
		out = append(out, e)
	}
	return ri, out, sc.Err()
}

// LogTailLines is how much of a failed task's output its journal record keeps.
const LogTailLines = 20

// LastLines is the end of s, n lines at most.
func LastLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	for i, k := len(s), 0; i > 0; i-- {
		if s[i-1] == '\n' {
			if k++; k == n {
				return s[i:]
			}
		}
	}
	return s
}
