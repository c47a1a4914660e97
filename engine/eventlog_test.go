package engine

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mensylisir/kubexm/engine/model"
)

// eventLog keeps the JSON event stream of every run the harness makes when
// KUBEXM_EVENT_LOG names a file, which TestMain writes at the end: a
// restructuring of the engine shows the stream unchanged by comparing the
// file before and after (issue 48). What varies from run to run is left
// out: times, durations, run ids, temporary directories, and the order of
// events within a run (hosts run concurrently).
var eventLog struct {
	mu   sync.Mutex
	runs []string
}

var (
	tempPath = regexp.MustCompile(`/tmp/[^/\s"]+/[0-9]+`)
	runPath  = regexp.MustCompile(`runs/[0-9]{8}-[0-9.]+-[0-9a-f]+`)
)

func logEvents(events []model.Event) {
	if os.Getenv("KUBEXM_EVENT_LOG") == "" {
		return
	}
	lines := make([]string, 0, len(events))
	for _, e := range events {
		e.Time, e.DurationMS, e.Run = model.Event{}.Time, 0, ""
		if e.Recap != nil {
			rc := *e.Recap
			rc.Duration, rc.RunID = 0, ""
			e.Recap = &rc
		}
		b, err := json.Marshal(e)
		if err != nil {
			panic(err)
		}
		lines = append(lines, runPath.ReplaceAllString(tempPath.ReplaceAllString(string(b), "/tmp/T"), "runs/ID"))
	}
	slices.Sort(lines)
	eventLog.mu.Lock()
	eventLog.runs = append(eventLog.runs, strings.Join(lines, "\n"))
	eventLog.mu.Unlock()
}

func TestMain(m *testing.M) {
	code := m.Run()
	if p := os.Getenv("KUBEXM_EVENT_LOG"); p != "" {
		slices.Sort(eventLog.runs)
		var b bytes.Buffer
		for _, r := range eventLog.runs {
			b.WriteString(r + "\n\n")
		}
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			panic(err)
		}
	}
	os.Exit(code)
}
