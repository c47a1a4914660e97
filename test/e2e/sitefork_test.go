//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/test/testhosts"
)

// envSiteForkOnly runs only the site fork step of the cluster suite, on
// fresh machines (make e2e-cluster with KUBEXM_E2E_SITEFORK_ONLY=1).
const envSiteForkOnly = "KUBEXM_E2E_SITEFORK_ONLY"

// envSiteFork=0 leaves the step out of the cluster suite (make e2e: it is
// a second cluster, 10-12 minutes on CI's machine; make e2e-cluster runs it).
const envSiteFork = "KUBEXM_E2E_SITEFORK"

// siteFork is issue 17's acceptance on the cluster suite's machines, once
// the suite's own cluster is deleted: docs/examples/site-fork as a site
// would use it, the built-in playbooks with --overlay, --roles-path and
// --skip-tags chrony, no copy of a built-in role:
//
//   - the containerd template's registry block, replaced by the overlay
//     (a registry.k8s.io mirror; the rest of the built-in template kept), and
//     containerd_extra_config are both in the configuration containerd
//     reads (containerd config dump);
//   - the last worker alone has maxPods 64 from its vars: in cluster.yaml,
//     the other nodes keep 110;
//   - network.plugin custom runs the site's role: its DaemonSet
//     site-net/site-flannel is on every node and there is no kube-flannel
//     namespace (the built-in flannel role did not run); the suite's
//     checks (nodes, pods across workers, DNS, services) pass on it;
//   - the after-health hook labelled every node;
//   - spec.system.ntpServers is set, and --skip-tags chrony left chrony
//     alone: not installed, not configured (the machines have no package
//     mirror, so an install would have failed the run);
//   - a re-run with the same flags changes nothing, and delete (which runs
//     the site role's delete.yaml) leaves the machines as clean as the
//     suite's own delete does.
//
// The file server serves a second export (the site's image and CNI plugin
// come through images_extra and artifacts_extra) and stops before the run.
func siteFork(ctx context.Context, t *testing.T, bin string, set *testhosts.Set, diag *diagnostics, kubectl, releaseRoot, root, work string) {
	t.Helper()
	start := time.Now()
	dir := filepath.Join(work, "site")
	if out, err := exec.CommandContext(ctx, "cp", "-a", filepath.Join(root, "docs", "examples", "site-fork"), dir).CombinedOutput(); err != nil {
		t.Fatalf("copy the example: %v\n%s", err, out)
	}
	// The suite's pods run busybox, carried as one more image of the site.
	groupVars := filepath.Join(dir, "group_vars", "all.yaml")
	gv, err := os.ReadFile(groupVars)
	if err != nil {
		t.Fatal(err)
	}
	const flannelImage = "  - {name: flannel, repo: ghcr.io/flannel-io/flannel, tag: \"{{ .flannel_version }}\"}\n"
	if !strings.Contains(string(gv), flannelImage) {
		t.Fatalf("%s lacks the line\n%s", groupVars, flannelImage)
	}
	gv = []byte(strings.Replace(string(gv), flannelImage, flannelImage+"  - {name: busybox, repo: docker.io/library/busybox, tag: \"1.35.0\"}\n", 1))
	if err := os.WriteFile(groupVars, gv, 0o644); err != nil {
		t.Fatal(err)
	}

	const name = "e2e-site"
	last := set.Hosts[len(set.Hosts)-1].Name
	inventory := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(inventory, []byte(siteForkClusterYAML(name, set, last)), 0o600); err != nil {
		t.Fatal(err)
	}
	// The suite's variables, but for the two the fork sets in its files:
	// images_extra (group_vars) and kubelet_extra_config (cluster.yaml).
	var extra []string
	for _, v := range clusterTestVars() {
		if !strings.HasPrefix(v, `{"images_extra"`) && v != `{"kubelet_extra_config": `+testKubeletConfig+`}` {
			extra = append(extra, v)
		}
	}
	if len(extra) != len(clusterTestVars())-2 {
		t.Fatalf("clusterTestVars no longer has images_extra and kubelet_extra_config as the site fork expects: %q", clusterTestVars())
	}
	kx := kubexm{bin: bin, dir: dir, inventory: inventory, extra: extraVars(extra...), observe: diag.observe}
	k := kubectlRunner{bin: kubectl, kubeconfig: filepath.Join(dir, ".kubexm", name, "kubeconfig")}
	diag.cluster(k)
	site := []string{"--overlay", filepath.Join(dir, "overlay"), "--roles-path", filepath.Join(dir, "roles")}

	server, stop := serveDirStoppable(t, set.Gateway, releaseRoot)
	bundle := exportBundle(ctx, t, kx, server, " of the site fork", "--roles-path", filepath.Join(dir, "roles"))
	stop()

	create := filepath.Join(root, "playbooks", "create-cluster")
	args := append([]string{"--offline-bundle", bundle, "--skip-tags", "chrony"}, site...)
	res := kx.play(ctx, create, args...)
	if res.err != nil {
		t.Fatalf("create-cluster of the site fork failed after %s: %v%s", res.wall, res.err, res.failures())
	}
	t.Logf("PERF create-cluster of the site fork on 3 machines: %s (%d changed)", res.wall.Round(time.Millisecond), len(res.changed()))
	checkNodes(ctx, t, k, set)
	checkWorkloads(ctx, t, k, set)
	checkSiteFork(ctx, t, k, set, last)

	res = kx.play(ctx, create, args...)
	if res.err != nil {
		t.Fatalf("re-run of the site fork failed: %v%s", res.err, res.failures())
	}
	t.Logf("PERF create-cluster re-run of the site fork (nothing to change): %s", res.wall.Round(time.Millisecond))
	if c := res.changed(); len(c) > 0 {
		t.Errorf("re-run of the site fork changed %d things, want 0:\n  %s", len(c), strings.Join(c, "\n  "))
	}

	res = kx.play(ctx, filepath.Join(root, "playbooks", "delete"), site...)
	if res.err != nil {
		t.Fatalf("delete of the site fork failed: %v%s", res.err, res.failures())
	}
	t.Logf("PERF delete of the site fork: %s", res.wall.Round(time.Millisecond))
	checkDeleted(ctx, t, set, "/etc/cni/net.d/10-site-flannel.conflist", "/etc/kubernetes/site")
	t.Logf("PERF the site fork step: %s", time.Since(start).Round(time.Second))
}

// siteForkClusterYAML is the cluster suite's layout with the example's
// choices: network.plugin custom (site-flannel), ntpServers, and on the
// host last its own kubelet_extra_config. The test machines' kubelet
// settings (clusterTestVars) are every host's through roleGroupVars.all;
// last's own value replaces them, so it repeats them beside maxPods.
func siteForkClusterYAML(name string, set *testhosts.Set, last string) string {
	base := kubernetesClusterYAML(name, set)
	base = strings.Replace(base, "  network:\n    plugin: flannel\n",
		"  network:\n    plugin: custom\n    customRole: site-flannel\n  system:\n    ntpServers: ["+set.Hosts[0].Name+"]\n"+
			"  roleGroupVars:\n    all:\n      kubelet_extra_config: "+testKubeletConfig+"\n", 1)
	host := fmt.Sprintf("  - {name: %s, ", last)
	return strings.Replace(base, host, host+`vars: {kubelet_extra_config: {"maxPods": 64, `+strings.TrimPrefix(testKubeletConfig, "{")+"}, ", 1)
}

// checkSiteFork checks what each part of the example changed, and that the
// built-in parts it replaced stayed out.
func checkSiteFork(ctx context.Context, t *testing.T, k kubectlRunner, set *testhosts.Set, last string) {
	t.Helper()
	for _, h := range set.Hosts {
		out, err := set.SSH(ctx, h.Name, `c=/etc/containerd/config.toml
grep -c 'mirror.site.example' "$c" || true
/usr/local/bin/containerd --config "$c" config dump | grep -E 'max_container_log_line_size|mirror\.site\.example' | tr -d ' '
if dpkg-query -W -f='${Status}' chrony 2>/dev/null | grep -q 'install ok installed'; then echo chrony-installed; fi
for f in /etc/chrony /etc/chrony.conf; do [ -e "$f" ] && echo "chrony-file $f"; done
true`)
		if err != nil {
			t.Fatalf("site fork checks on %s: %v\n%s", h.Name, err, out)
		}
		for _, want := range []string{"max_container_log_line_size=32768", "mirror.site.example"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: containerd's configuration lacks %s (overlay / containerd_extra_config):\n%s", h.Name, want, out)
			}
		}
		if strings.Contains(out, "chrony") {
			t.Errorf("%s: --skip-tags chrony, yet chrony was touched:\n%s", h.Name, out)
		}
	}

	out, err := k.run(ctx, "", "get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.capacity.pods},{.metadata.labels.site\.example/dc}{"\n"}{end}`)
	if err != nil {
		t.Fatalf("kubectl get nodes: %v\n%s", err, out)
	}
	for _, h := range set.Hosts {
		want := h.Name + "=110,dc1"
		if h.Name == last {
			want = h.Name + "=64,dc1"
		}
		if !strings.Contains(out+"\n", want+"\n") {
			t.Errorf("node %s: want %s (pods from its own vars:, the label from the hook), have:\n%s", h.Name, want, out)
		}
	}

	out, err = k.run(ctx, "", "-n", "site-net", "get", "daemonset", "site-flannel", "-o", "jsonpath={.status.numberReady}/{.status.desiredNumberScheduled}")
	if err != nil || out != fmt.Sprintf("%d/%d", len(set.Hosts), len(set.Hosts)) {
		t.Errorf("the site's network: daemonset site-net/site-flannel ready/desired %q, want all %d: %v", out, len(set.Hosts), err)
	}
	if out, err := k.run(ctx, "", "get", "namespace", "kube-flannel", "--ignore-not-found", "-o", "name"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("the built-in flannel ran beside the site's network: %q %v", out, err)
	}
}
