//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// clusterTimeline records, every second until stopped, what decides
// whether a ClusterIP Service answers: its EndpointSlices' endpoints
// (address, node, ready), the kube-controller-manager Lease's holder and
// the nodes that are not Ready. It keeps one entry per change, so that a
// poller's outage can be read against what the cluster said meanwhile.
type clusterTimeline struct {
	mu      sync.Mutex
	entries []timelineEntry
	stopped time.Time
	cancel  context.CancelFunc
	done    chan struct{}
}

type timelineEntry struct {
	at   time.Time
	what string
}

func (e timelineEntry) String() string {
	return e.at.UTC().Format("15:04:05.000") + " " + e.what
}

// recordTimeline starts the recorder for the Service ns/name through
// kubeconfig's API server.
func recordTimeline(ctx context.Context, kubeconfig, ns, name string) (*clusterTimeline, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("the timeline's kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.Timeout = 2 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("the timeline's client: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	tl := &clusterTimeline{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(tl.done)
		last := map[string]string{}
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			for _, s := range []struct{ key, value string }{
				{"endpoints", serviceEndpoints(ctx, cs, ns, name)},
				{"kube-controller-manager's Lease", leaseHolder(ctx, cs)},
				{"nodes not Ready", nodesNotReady(ctx, cs)},
			} {
				if last[s.key] != s.value {
					last[s.key] = s.value
					tl.add(s.key + ": " + s.value)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return tl, nil
}

func (tl *clusterTimeline) add(what string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.entries = append(tl.entries, timelineEntry{at: time.Now(), what: what})
}

func (tl *clusterTimeline) stop() {
	tl.cancel()
	<-tl.done
	tl.mu.Lock()
	tl.stopped = time.Now()
	tl.mu.Unlock()
}

// longestNotReady is each node's longest run of a Ready condition other than
// True, from the first entry naming it to the next that does not (or to
// the timeline's stop). An API that did not answer ends no run.
func (tl *clusterTimeline) longestNotReady() map[string]time.Duration {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	longest := map[string]time.Duration{}
	since := map[string]time.Time{}
	end := func(n string, at time.Time) {
		if d := at.Sub(since[n]); d > longest[n] {
			longest[n] = d
		}
		delete(since, n)
	}
	const key = "nodes not Ready: "
	for _, e := range tl.entries {
		list, ok := strings.CutPrefix(e.what, key)
		if !ok || strings.HasPrefix(list, "(unread") {
			continue
		}
		now := map[string]bool{}
		for _, f := range strings.Fields(strings.Trim(list, "[]")) {
			n, _, _ := strings.Cut(f, "=")
			now[n] = true
			if _, on := since[n]; !on {
				since[n] = e.at
			}
		}
		for n := range since {
			if !now[n] {
				end(n, e.at)
			}
		}
	}
	for n := range since {
		end(n, tl.stopped)
	}
	return longest
}

// around is what changed from before ahead of from up to to, and the state
// each thing was in at that start.
func (tl *clusterTimeline) around(from, to time.Time, before time.Duration) []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	start := from.Add(-before)
	var out []string
	state := map[string]timelineEntry{}
	for _, e := range tl.entries {
		if e.at.After(to) {
			break
		}
		if e.at.Before(start) {
			state[strings.SplitN(e.what, ": ", 2)[0]] = e
			continue
		}
		out = append(out, e.String())
	}
	var held []string
	for _, e := range state {
		held = append(held, e.String()+" (held)")
	}
	sort.Strings(held)
	return append(held, out...)
}

// of is every entry of what (e.g. "nodes not Ready"), in order.
func (tl *clusterTimeline) of(what string) []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var out []string
	for _, e := range tl.entries {
		if strings.HasPrefix(e.what, what+": ") {
			out = append(out, e.String())
		}
	}
	return out
}

func serviceEndpoints(ctx context.Context, cs kubernetes.Interface, ns, name string) string {
	slices, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		return "(unread: " + firstLine(err.Error()) + ")"
	}
	var eps []string
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			node, ready := "", "unknown"
			if e.NodeName != nil {
				node = *e.NodeName
			}
			if e.Conditions.Ready != nil {
				ready = fmt.Sprint(*e.Conditions.Ready)
			}
			eps = append(eps, fmt.Sprintf("%s@%s ready=%s", strings.Join(e.Addresses, ","), node, ready))
		}
	}
	sort.Strings(eps)
	return fmt.Sprintf("%d slices [%s]", len(slices.Items), strings.Join(eps, "; "))
}

func leaseHolder(ctx context.Context, cs kubernetes.Interface) string {
	l, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, "kube-controller-manager", metav1.GetOptions{})
	if err != nil {
		return "(unread: " + firstLine(err.Error()) + ")"
	}
	if l.Spec.HolderIdentity == nil {
		return "(none)"
	}
	return strings.SplitN(*l.Spec.HolderIdentity, "_", 2)[0]
}

func nodesNotReady(ctx context.Context, cs kubernetes.Interface) string {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "(unread: " + firstLine(err.Error()) + ")"
	}
	var out []string
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
				out = append(out, n.Name+"="+string(c.Status))
			}
		}
	}
	sort.Strings(out)
	return "[" + strings.Join(out, " ") + "]"
}

// TestTimelineLongestNotReady reads runs of not Ready out of the
// timeline's entries: a run ends at the first entry without the node, an
// unread API ends none, and a run still open ends at the stop.
func TestTimelineLongestNotReady(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 7, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	tl := &clusterTimeline{stopped: at(100), entries: []timelineEntry{
		{at(0), "nodes not Ready: []"},
		{at(1), "endpoints: 1 slices []"},
		{at(10), "nodes not Ready: [n2=Unknown]"},
		{at(15), "nodes not Ready: (unread: timeout)"},
		{at(20), "nodes not Ready: [n2=Unknown n4=False]"},
		{at(30), "nodes not Ready: [n4=False]"},
		{at(34), "nodes not Ready: []"},
		{at(50), "nodes not Ready: [n2=False]"},
		{at(55), "nodes not Ready: []"},
		{at(90), "nodes not Ready: [n5=Unknown]"},
	}}
	got := tl.longestNotReady()
	want := map[string]time.Duration{"n2": 20 * time.Second, "n4": 14 * time.Second, "n5": 10 * time.Second}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for n, d := range want {
		if got[n] != d {
			t.Errorf("%s: %s, want %s (all: %v)", n, got[n], d, got)
		}
	}
}
