package output

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mensylisir/kubexm/engine/model"
)

// Live is the text view for a terminal: the lines of Text scroll as usual,
// and below them a block is redrawn in place: every task running now with
// its hosts done and elapsed time, and each host's last result, so a host
// that lags behind the others shows. The block is erased for good at the
// recap (or Close), leaving exactly what Text prints.
type Live struct {
	text  *Text
	out   io.Writer
	width func() int
	now   func() time.Time

	mu       sync.Mutex
	drawn    int // lines of the block on the screen
	finished bool
	frame    int
	tasks    map[string]*liveTask
	taskIDs  []string // in start order
	hosts    map[string]*liveHost
	hostIDs  []string // in order of first result

	stop chan struct{}
	done chan struct{}
}

type liveTask struct {
	title          string
	start          time.Time
	starts, ends   int // one of each per run of the task (per host under the free strategy)
	total          int
	hostsReporting map[string]bool
}

type liveHost struct {
	status model.Status
	task   string
}

// liveBlock bounds the block: tasks and hosts beyond these are summed up
// in one line each.
const (
	liveMaxTasks = 4
	liveMaxHosts = 10
)

// NewLive returns the live view writing to the terminal out, width saying
// how many columns it has now. It redraws its block a few times a second
// until the recap or Close.
func NewLive(out io.Writer, verbosity int, width func() int) *Live {
	l := &Live{text: NewText(out, verbosity), out: out, width: width, now: time.Now, tasks: map[string]*liveTask{}, hosts: map[string]*liveHost{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go l.tick(250 * time.Millisecond)
	return l
}

// Emit updates the block with e and prints e as Text does, above the
// block. Text writes whole lines for an event, so the block is erased
// before and drawn after, under the lock the redraws take too.
func (l *Live) Emit(e model.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.update(e)
	l.erase()
	l.text.Emit(e)
	if e.Kind == model.EventRecap {
		l.finished = true
	}
	if !l.finished {
		l.draw()
	}
}

// Close erases the block and stops redrawing it.
func (l *Live) Close() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	l.erase()
	l.finished = true
}

func (l *Live) tick(every time.Duration) {
	defer close(l.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			l.mu.Lock()
			if !l.finished {
				l.frame++
				l.erase()
				l.draw()
			}
			l.mu.Unlock()
		}
	}
}

// taskKey names a task across its events (a host result's position may
// name the include it came through, not the task's own).
func taskKey(e model.Event) string { return e.Play + "\x00" + e.Role + "\x00" + e.Task }

func (l *Live) update(e model.Event) {
	switch e.Kind {
	case model.EventTaskStart:
		k := taskKey(e)
		t := l.tasks[k]
		if t == nil {
			t = &liveTask{title: taskTitle(e), start: l.now(), hostsReporting: map[string]bool{}}
			l.tasks[k] = t
			l.taskIDs = append(l.taskIDs, k)
		}
		t.starts++
		t.total += e.Total
	case model.EventHostResult:
		if t := l.tasks[taskKey(e)]; t != nil {
			t.hostsReporting[e.Host] = true
		}
		h := l.hosts[e.Host]
		if h == nil {
			h = &liveHost{}
			l.hosts[e.Host] = h
			l.hostIDs = append(l.hostIDs, e.Host)
		}
		h.status, h.task = e.Status, taskTitle(e)
	case model.EventTaskEnd:
		k := taskKey(e)
		if t := l.tasks[k]; t != nil {
			if t.ends++; t.ends >= t.starts {
				delete(l.tasks, k)
				l.taskIDs = slices.DeleteFunc(l.taskIDs, func(id string) bool { return id == k })
			}
		}
	case model.EventPlayEnd:
		// A play that stopped early (every host failed) ends its tasks.
		clear(l.tasks)
		l.taskIDs = nil
	}
}

// erase moves up over the block and clears the screen below.
func (l *Live) erase() {
	if l.drawn == 0 {
		return
	}
	fmt.Fprintf(l.out, "\x1b[%dA\r\x1b[J", l.drawn)
	l.drawn = 0
}

// draw writes the block below the cursor, each line cut to the terminal's
// width so that none wraps (a wrapped line would be miscounted by erase).
func (l *Live) draw() {
	lines := l.block()
	if len(lines) == 0 {
		return
	}
	w := l.width()
	if w <= 0 {
		w = 80
	}
	var b strings.Builder
	for _, s := range lines {
		b.WriteString(cut(s, w-1))
		b.WriteByte('\n')
	}
	_, _ = io.WriteString(l.out, b.String())
	l.drawn = len(lines)
}

var spinner = []string{"|", "/", "-", "\\"}

func (l *Live) block() []string {
	if len(l.taskIDs) == 0 {
		return nil
	}
	now := l.now()
	var lines []string
	newest := ""
	for i, k := range l.taskIDs {
		t := l.tasks[k]
		newest = t.title
		if i == liveMaxTasks {
			lines = append(lines, fmt.Sprintf("  ... and %d more tasks running", len(l.taskIDs)-liveMaxTasks))
			continue
		}
		if i > liveMaxTasks {
			continue
		}
		lines = append(lines, fmt.Sprintf("%s TASK %s  %d/%d hosts  %s", spinner[l.frame%len(spinner)], t.title,
			len(t.hostsReporting), t.total, now.Sub(t.start).Round(time.Second)))
	}
	// Hosts whose last result is of an older task than the newest one
	// running come first: those are the ones the run waits for.
	hosts := slices.Clone(l.hostIDs)
	slices.SortStableFunc(hosts, func(a, b string) int {
		la, lb := l.hosts[a].task != newest, l.hosts[b].task != newest
		switch {
		case la && !lb:
			return -1
		case lb && !la:
			return 1
		}
		return 0
	})
	width := 0
	for _, h := range hosts {
		width = max(width, utf8.RuneCountInString(h))
	}
	for i, name := range hosts {
		if i == liveMaxHosts {
			lines = append(lines, fmt.Sprintf("  ... and %d more hosts", len(hosts)-liveMaxHosts))
			break
		}
		h := l.hosts[name]
		lines = append(lines, fmt.Sprintf("  %-*s  %-11s %s", width, name, h.status, h.task))
	}
	return lines
}

// cut shortens s to at most n runes.
func cut(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n])
}
