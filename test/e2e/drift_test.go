//go:build e2e

package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/test/testhosts"
)

// driftRepair is issue 55's drift test on a cluster create-cluster built:
// on one worker, one byte of an installed binary is changed in place with
// its size kept and its mtime put back (`touch -r`, as an accident or
// attacker that restores the timestamp would), so only its content and
// ctime tell; and a systemd unit and a configuration file are edited. The
// host's sum record of the binary (/var/lib/kubexm/sums, written by the
// earlier re-runs) must exist before the change, so the re-run below does
// consult it. A re-run must find each change and put the file back as it
// was: one that trusted the record's size and mtime would report 0 changed
// here. The suite's next re-run proves the repaired host then changes
// nothing.
func driftRepair(ctx context.Context, t *testing.T, kx kubexm, set *testhosts.Set, create, bundle string) {
	t.Helper()
	const host = "n2"
	files := map[string]string{
		"/usr/local/bin/ctr":                     "containerd - binaries",
		"/etc/systemd/system/kube-proxy.service": "Kubernetes node - kube-proxy unit",
		"/var/lib/kubelet/config.yaml":           "Kubernetes node - kubelet configuration",
	}
	var paths []string
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	before := snapshot(ctx, t, set, host, paths...)
	// The byte at offset 4096 of the binary becomes another byte, its size
	// and mtime kept; the unit and the configuration get a line they did
	// not have. The record is named by the sha256 of the binary's path
	// (engine/transport/ssh/sums.go).
	script := `set -e
bin=/usr/local/bin/ctr
rec=/var/lib/kubexm/sums/$(printf %s "$bin" | sha256sum | cut -c1-64)
[ -f "$rec" ] || { echo "no sum record $rec of $bin: the earlier re-runs did not record it" >&2; exit 1; }
size=$(stat -c %s "$bin") mtime=$(stat -c %y "$bin")
touch -r "$bin" /tmp/kubexm-drift-mtime
old=$(dd if="$bin" bs=1 skip=4096 count=1 2>/dev/null | od -An -tu1 | tr -d ' ')
new=$(( (old + 1) % 256 ))
printf "\\$(printf %03o "$new")" | dd of="$bin" bs=1 seek=4096 count=1 conv=notrunc 2>/dev/null
touch -r /tmp/kubexm-drift-mtime "$bin"
rm -f /tmp/kubexm-drift-mtime
[ "$(stat -c %s "$bin")" = "$size" ] || { echo "size of $bin changed" >&2; exit 1; }
[ "$(stat -c %y "$bin")" = "$mtime" ] || { echo "mtime of $bin not restored" >&2; exit 1; }
echo '# drift' >>/etc/systemd/system/kube-proxy.service
echo '# drift' >>/var/lib/kubelet/config.yaml`
	if out, err := set.SSH(ctx, host, script); err != nil {
		t.Fatalf("drift on %s: %v\n%s", host, err, out)
	}
	drifted := snapshot(ctx, t, set, host, paths...)
	for _, p := range paths {
		if drifted[p] == before[p] {
			t.Fatalf("drift on %s: %s did not change (%s)", host, p, before[p])
		}
	}

	res := kx.play(ctx, create, "--offline-bundle", bundle)
	if res.err != nil {
		t.Fatalf("re-run after the drift failed: %v%s", res.err, res.failures())
	}
	changed := hostChanges(res)
	t.Logf("PERF create-cluster re-run repairing a binary, a unit and a configuration on %s: %s (%d changed: %s)", host, res.wall.Round(1e6), len(changed), strings.Join(changed, "; "))
	for _, p := range paths {
		if want := host + ": " + files[p]; !slices.Contains(changed, want) {
			t.Errorf("the re-run did not repair %s on %s: %q is not among the changes %q", p, host, want, changed)
		}
	}
	for _, c := range changed {
		if !strings.HasPrefix(c, host+": ") {
			t.Errorf("the re-run changed a host that did not drift: %s", c)
		}
	}
	after := snapshot(ctx, t, set, host, paths...)
	for _, p := range paths {
		if after[p] != before[p] {
			t.Errorf("%s on %s after the re-run:\n  %s\nwant as installed:\n  %s", p, host, after[p], before[p])
		}
	}
}
