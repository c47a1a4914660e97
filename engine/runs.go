package engine

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"
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
		if ri, ok := readRunInfo(filepath.Join(runsDir(workDir), e.Name(), journalFile)); ok {
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
	var hdr journalRecord
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
	var end journalRecord
	if json.Unmarshal(last, &end) == nil && end.Type == "end" {
		ri.Outcome = end.Outcome
		ri.End, _ = time.Parse(time.RFC3339Nano, end.Time)
	}
	return ri, true
}
