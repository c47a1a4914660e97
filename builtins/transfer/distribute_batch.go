package transfer

import (
	"context"
	"path"
	"path/filepath"
	"strings"

	"github.com/mensylisir/kubexm/builtins/onhost"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
)

// RunBatch implements step.Batcher: the sums and attributes of every
// item's dest are read in one command (transports that can, see
// transport.ManySummer), and each item already in place, with its mode,
// owner and group, is done without another round trip; every other item
// runs as Run would. So a re-run of a loop over 18 CNI plugins is one round
// trip per host instead of 18 or more. Items naming the same dest all run
// one by one: one may change what the other reads.
func (d distributeBuiltin) RunBatch(ctx context.Context, items []step.BatchItem) ([]step.Result, []error) {
	results, errs := make([]step.Result, len(items)), make([]error, len(items))
	decided := d.inPlaceItems(ctx, items, results)
	for i, it := range items {
		if decided[i] {
			continue
		}
		if ctx.Err() != nil {
			errs[i] = ctx.Err()
			continue
		}
		results[i], errs[i] = d.Run(ctx, it.Env, it.Args)
	}
	return results, errs
}

// inPlaceItems finds, in one read of the host, the items whose dest is
// already as asked, and sets their results; the others stay for Run.
func (d distributeBuiltin) inPlaceItems(ctx context.Context, items []step.BatchItem, results []step.Result) []bool {
	decided := make([]bool, len(items))
	env := items[0].Env
	summer, ok := env.Target.(transport.ManySummer)
	if !ok {
		return decided
	}
	wants := make([]*sendWant, len(items))
	seen := map[string]int{}
	for i, it := range items {
		if wants[i] = d.batchWant(ctx, it); wants[i] != nil {
			seen[wants[i].dest]++
		}
	}
	var dests []string
	var at []int
	for i, w := range wants {
		if w != nil && seen[w.dest] == 1 {
			dests = append(dests, w.dest)
			at = append(at, i)
		}
	}
	if len(dests) < 2 {
		return decided
	}
	sums, err := summer.SumMany(ctx, dests, env.Become)
	if err != nil {
		// Item by item then, as without batching.
		if env.Logf != nil {
			env.Logf("distribute: reading %d sums at once failed, one by one: %v", len(dests), err)
		}
		return decided
	}
	for k, i := range at {
		w, env := wants[i], items[i].Env
		if !inPlace(sums[k], w.sum, onhost.AttrsFrom(items[i].Args)) {
			continue
		}
		if w.large && !env.Check {
			d.relay.hold(w.sum, &holder{host: env.Target.Host(), addr: relayAddr(env), path: w.dest, t: env.Target, become: env.Become})
		}
		results[i] = step.Result{Data: map[string]any{"dest": w.dest, "checksum": w.sum}}
		decided[i] = true
	}
	return decided
}

// sendWant is one item of a distribute batch: the sum of its src, where it
// goes, and whether it is passed host to host.
type sendWant struct {
	sum, dest string
	large     bool
}

// batchWant is what an item asks for, or nil when a sum cannot decide it
// (no src on the control machine, a relative dest): Run then tells why.
func (d distributeBuiltin) batchWant(ctx context.Context, it step.BatchItem) *sendWant {
	src, err := archivePath(ctx, it.Env, it.Args.String("src"))
	if err != nil {
		return nil
	}
	sum, err := it.Env.Control.Sha256(ctx, src, false)
	if err != nil || sum == "" {
		return nil
	}
	dest := it.Args.String("dest")
	if strings.HasSuffix(dest, "/") {
		dest = path.Join(dest, filepath.Base(src))
	}
	if !path.IsAbs(dest) {
		return nil
	}
	w := &sendWant{sum: sum, dest: dest}
	if d.relay != nil && it.Args.Bool("relay") {
		fi, err := it.Env.Control.Stat(ctx, src, false)
		if err != nil {
			return nil
		}
		w.large = fi.Size >= relayMinSize
	}
	return w
}

// inPlace says whether a file read as have is sum with the attributes a
// asks for (mode 0644 unless given; owner and group by name or id), as
// PutFile decides.
func inPlace(have transport.FileSum, sum string, a onhost.Attrs) bool {
	if have.Sum == "" || have.Sum != sum {
		return false
	}
	mode := a.Mode
	if mode == 0 {
		mode = 0o644
	}
	return have.Mode == transport.UnixMode(mode) &&
		(a.Owner == "" || a.Owner == have.Owner || a.Owner == have.UID) &&
		(a.Group == "" || a.Group == have.Group || a.Group == have.GID)
}
