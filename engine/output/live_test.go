package output

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/engine/model"
)

// screen is a terminal of the few escapes Live uses: cursor up, carriage
// return, clear to the end of the screen.
type screen struct {
	mu        sync.Mutex
	lines     []string
	row       int
	raw       bytes.Buffer
	maxBlocks int // the most lines below the last log line ever drawn
}

var csi = regexp.MustCompile(`^\x1b\[(\d*)([AJ])`)

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.raw.Write(p)
	for i := 0; i < len(p); {
		if m := csi.FindSubmatch(p[i:]); m != nil {
			n, _ := strconv.Atoi(string(m[1]))
			if string(m[2]) == "A" {
				s.row -= n
			} else {
				s.lines = s.lines[:s.row+1]
				s.lines[s.row] = ""
			}
			i += len(m[0])
			continue
		}
		for len(s.lines) <= s.row {
			s.lines = append(s.lines, "")
		}
		switch p[i] {
		case '\n':
			s.row++
			for len(s.lines) <= s.row {
				s.lines = append(s.lines, "")
			}
		case '\r':
		default:
			s.lines[s.row] += string(p[i])
		}
		i++
	}
	return len(p), nil
}

func (s *screen) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n")
}

// TestLive: while a task runs, the block below the log shows it with its
// hosts done and each host's last result, the host that lags first; when
// the run ends the screen holds exactly what Text prints, no block left.
func TestLive(t *testing.T) {
	now := time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)
	evs := []model.Event{
		{Time: now, Kind: model.EventPlayStart, Run: "r1", Play: "install", Message: "hosts: all"},
		{Time: now, Kind: model.EventTaskStart, Run: "r1", Play: "install", Role: "etcd", Task: "unpack", Total: 3},
		{Time: now, Kind: model.EventHostResult, Run: "r1", Play: "install", Role: "etcd", Task: "unpack", Host: "n1", Status: model.StatusChanged},
		{Time: now, Kind: model.EventHostResult, Run: "r1", Play: "install", Role: "etcd", Task: "unpack", Host: "n2", Status: model.StatusOK},
		{Time: now, Kind: model.EventHostResult, Run: "r1", Play: "install", Role: "etcd", Task: "unpack", Host: "n3", Status: model.StatusOK},
		{Time: now, Kind: model.EventTaskEnd, Run: "r1", Play: "install", Role: "etcd", Task: "unpack", Done: 3, Total: 3, DurationMS: 900, Counts: map[model.Status]int{model.StatusChanged: 1, model.StatusOK: 2}},
		{Time: now, Kind: model.EventTaskStart, Run: "r1", Play: "install", Role: "etcd", Task: "start", Total: 3},
		{Time: now, Kind: model.EventHostResult, Run: "r1", Play: "install", Role: "etcd", Task: "start", Host: "n1", Status: model.StatusChanged},
		{Time: now, Kind: model.EventHostResult, Run: "r1", Play: "install", Role: "etcd", Task: "start", Host: "n3", Status: model.StatusChanged},
	}
	rest := []model.Event{
		{Time: now, Kind: model.EventHostResult, Run: "r1", Play: "install", Role: "etcd", Task: "start", Host: "n2", Status: model.StatusChanged},
		{Time: now, Kind: model.EventTaskEnd, Run: "r1", Play: "install", Role: "etcd", Task: "start", Done: 3, Total: 3, DurationMS: 1200, Counts: map[model.Status]int{model.StatusChanged: 3}},
		{Time: now, Kind: model.EventPlayEnd, Run: "r1", Play: "install"},
		{Time: now, Kind: model.EventRecap, Run: "r1", Recap: &model.Recap{RunID: "r1", Order: []string{"n1", "n2", "n3"}, Duration: 3 * time.Second,
			Hosts: map[string]*model.HostStats{"n1": {OK: 2, Changed: 2}, "n2": {OK: 2, Changed: 1}, "n3": {OK: 2, Changed: 1}}}},
	}
	var scr screen
	l := NewLive(&scr, 0, func() int { return 60 })
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	l.mu.Lock()
	l.now = func() time.Time { return time.Unix(0, clock.Load()) }
	l.mu.Unlock()
	for _, e := range evs {
		l.Emit(e)
	}
	clock.Add(int64(7 * time.Second))
	time.Sleep(600 * time.Millisecond) // the ticker redraws with the new time
	mid := scr.text()
	lines := strings.Split(strings.TrimRight(mid, "\n"), "\n")
	want := []string{"TASK etcd : start  2/3 hosts  7s", "n2  ok          etcd : unpack", "n1  changed     etcd : start", "n3  changed     etcd : start"}
	if len(lines) < len(want) {
		t.Fatalf("screen while the task runs:\n%s", mid)
	}
	block := lines[len(lines)-len(want):]
	for i, w := range want {
		if !strings.HasSuffix(block[i], w) {
			t.Errorf("block line %d: %q, want it to end in %q\nscreen:\n%s", i, block[i], w, mid)
		}
	}
	for _, line := range block {
		if len([]rune(line)) > 59 {
			t.Errorf("a line wider than the terminal: %q", line)
		}
	}
	for _, e := range rest {
		l.Emit(e)
	}
	l.Close()
	var plain bytes.Buffer
	tx := NewText(&plain, 0)
	for _, e := range append(evs, rest...) {
		tx.Emit(e)
	}
	// The log's own clock differs between the two views.
	stamp := regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d `)
	norm := func(s string) string { return stamp.ReplaceAllString(strings.TrimRight(s, "\n"), "") }
	if got := scr.text(); norm(got) != norm(plain.String()) {
		t.Errorf("the screen after the run is not Text's output:\n%s\n--- want\n%s", got, plain.String())
	}
}
