//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// envSuitesAtOnce is how many suites with machines of their own run at a
// time (2 by default: CI's 2 cores; the suites mostly wait on their
// machines, so two at a time nearly halve the e2e stage). go test's
// -parallel must be at least the number of suites for the longest-first
// order to see them all (make e2e passes -parallel 16).
const envSuitesAtOnce = "KUBEXM_E2E_SUITES_AT_ONCE"

// suiteMinutes is each suite's usual length in CI beside another suite
// (2026-11-27). The longest start first: in go test's order (the files'),
// TestNodes started last and CI's e2e stage took 78 minutes; longest first
// (and without the HA suite's CA rotation) it took 58 (docs/perf.md).
var suiteMinutes = map[string]int{
	"TestConformance":       70,
	"TestKubeadmHA":         50,
	"TestUpgrade":           45,
	"TestUpgradeHA":         50,
	"TestNodes":             38,
	"TestHAControlPlane":    36,
	"TestKubeadmCluster":    30,
	"TestKubernetesCluster": 29,
	"TestVIPControlPlane":   20,
	"TestEtcdCluster":       6,
	"TestContainerd":        2,
}

// suites admits the suites, longest first, envSuitesAtOnce at a time.
var suites = &suiteGate{gathered: make(chan struct{})}

// suiteGate hands out the slots. go test releases the parallel suites
// together once the serial tests are done; the first to arrive opens a
// second's window for the others to line up, so that the longest, not the
// quickest to arrive, goes first.
type suiteGate struct {
	mu       sync.Mutex
	slots    int
	started  bool
	gathered chan struct{}
	waiting  map[string]chan struct{}
}

// acquire waits for the suite's turn; release hands its slot on.
func (g *suiteGate) acquire(name string) (release func(), err error) {
	g.mu.Lock()
	if !g.started {
		n, err := suitesAtOnce()
		if err != nil {
			g.mu.Unlock()
			return nil, err
		}
		g.start(n, time.Second)
	}
	turn := make(chan struct{})
	g.waiting[name] = turn
	select {
	case <-g.gathered:
		g.admit()
	default:
	}
	g.mu.Unlock()
	<-turn
	return g.release, nil
}

// start opens the gate with n slots once window has passed; g.mu is held.
func (g *suiteGate) start(n int, window time.Duration) {
	g.started, g.slots, g.waiting = true, n, map[string]chan struct{}{}
	time.AfterFunc(window, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		close(g.gathered)
		g.admit()
	})
}

func (g *suiteGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.slots++
	g.admit()
}

// admit starts the longest waiting suites while slots are free; g.mu is held.
func (g *suiteGate) admit() {
	for g.slots > 0 && len(g.waiting) > 0 {
		next := ""
		for name := range g.waiting {
			if next == "" || suiteMinutes[name] > suiteMinutes[next] ||
				(suiteMinutes[name] == suiteMinutes[next] && name < next) {
				next = name
			}
		}
		close(g.waiting[next])
		delete(g.waiting, next)
		g.slots--
	}
}

func suitesAtOnce() (int, error) {
	v := os.Getenv(envSuitesAtOnce)
	if v == "" {
		return 2, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q: want a number of suites, 1 or more", envSuitesAtOnce, v)
	}
	return n, nil
}

// parallelSuite makes a suite with machines of its own wait for its turn
// (suiteGate) beside the others; KUBEXM_E2E_SERIAL=1 runs them one by one,
// in go test's order, for timings.
func parallelSuite(t *testing.T) {
	if os.Getenv("KUBEXM_E2E_SERIAL") == "1" {
		return
	}
	t.Parallel()
	// go test's time for the suite includes this wait: the log says it.
	start := time.Now()
	release, err := suites.acquire(t.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	t.Logf("the suite's turn came after %s (KUBEXM_E2E_SUITES_AT_ONCE at a time, longest first)", time.Since(start).Round(time.Second))
}

func TestSuiteGateLongestFirst(t *testing.T) {
	g := &suiteGate{gathered: make(chan struct{})}
	g.mu.Lock()
	g.start(1, 200*time.Millisecond)
	g.mu.Unlock()
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	for _, name := range []string{"TestContainerd", "TestNewSuite", "TestNodes", "TestEtcdCluster"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := g.acquire(name)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			release()
		}()
	}
	wg.Wait()
	if got, want := fmt.Sprint(order), "[TestNodes TestEtcdCluster TestContainerd TestNewSuite]"; got != want {
		t.Errorf("admitted %s, want %s", got, want)
	}
}
