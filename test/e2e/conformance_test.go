//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/schema/validate"

	"github.com/mensylisir/kubexm/test/testhosts"
)

// Settings of TestConformance (make conformance sets them).
const (
	// KUBEXM_CONFORMANCE=1 runs it; without it the test is skipped, so that
	// `make e2e` and CI (which also leave it out by name, E2E_SKIP) never
	// spend the hour it takes.
	envConformance = "KUBEXM_CONFORMANCE"
	// KUBEXM_CONFORMANCE_MODE: binary (default: kubernetes.type kubexm) or
	// kubeadm (stacked etcd).
	envConformanceMode = "KUBEXM_CONFORMANCE_MODE"
	// KUBEXM_CONFORMANCE_OUT: where summary.md, report.json and ginkgo.log
	// go (default $KUBEXM_TEST_CACHE/conformance/<mode>).
	envConformanceOut = "KUBEXM_CONFORMANCE_OUT"
	// KUBEXM_CONFORMANCE_NODES: ginkgo's parallel processes (default 4).
	envConformanceNodes = "KUBEXM_CONFORMANCE_NODES"
	// KUBEXM_CONFORMANCE_FOCUS / _SKIP replace the default selection
	// (conformanceFocus, conformanceSkip); the skip file is always added.
	envConformanceFocus = "KUBEXM_CONFORMANCE_FOCUS"
	envConformanceSkip  = "KUBEXM_CONFORMANCE_SKIP"
	// KUBEXM_CONFORMANCE_SET: parallel (default), the conformance specs
	// that may share the cluster with others, or serial, the [Serial] and
	// [Disruptive] ones, one at a time on a cluster of their own, or netpol,
	// the NetworkPolicy specs (a CNI that enforces policy: calico).
	envConformanceSet = "KUBEXM_CONFORMANCE_SET"
	// KUBEXM_CONFORMANCE_CNI: flannel (default) or calico (network.plugin;
	// calico's images from test/artifacts/calico.sh in the bundle).
	envConformanceCNI = "KUBEXM_CONFORMANCE_CNI"
	// KUBEXM_CONFORMANCE_RUNTIME: containerd (default) or docker
	// (containerRuntime.type docker: dockerd and cri-dockerd from
	// test/artifacts/docker.sh, as make e2e-nodes-docker's cluster).
	envConformanceRuntime = "KUBEXM_CONFORMANCE_RUNTIME"
)

// The parallel set: every conformance spec that may share the cluster with
// others.
const (
	conformanceFocus = `\[Conformance\]`
	conformanceSkip  = `\[Serial\]|\[Disruptive\]`
)

// The serial set: the conformance specs that change the whole cluster
// (taints on every node, node-wide resources, namespace deletion) and so run
// alone, in one ginkgo process. Nothing is skipped but the skip file.
const (
	conformanceSerialFocus = `\[Conformance\].*\[(Serial|Disruptive)\]|\[(Serial|Disruptive)\].*\[Conformance\]`
	conformanceSerialSkip  = ``
)

// The netpol set: upstream's NetworkPolicy specs (test/e2e/network/netpol,
// every one [Feature:NetworkPolicy]: the Netpol TCP, UDP and SCTP
// contexts; their pods run agnhost porter and connect), minus the SCTP
// context, which also needs [Feature:SCTPConnectivity]: an SCTP server in
// the pods, and the test machines' kernel is built without SCTP sockets
// (CONFIG_IP_SCTP unset: socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP) fails
// with EPROTONOSUPPORT). The two Netpol TCP specs about policies naming
// SCTP (which must not admit TCP) run.
// The Netpol API spec is a [Conformance] spec of the parallel set.
const (
	conformanceNetpolFocus = `\[Feature:NetworkPolicy\]`
	conformanceNetpolSkip  = `\[Feature:SCTPConnectivity\]`
)

// TestConformance is issue 26: Kubernetes' own conformance suite (e2e.test
// and ginkgo of kubernetesVersion, test/artifacts/kubernetes.sh) against a
// cluster kubexm builds on three fresh machines (n1 master and etcd, n2 and
// n3 workers) from an offline bundle that also carries the suite's images
// (test/artifacts/images.sh conformance: agnhost, busybox, nginx, ...,
// built locally under the registry names of KUBE_TEST_REPO_LIST). The
// specs of test/conformance/skip.txt are left out, each with its reason.
// The summary (passed, failed, skipped, the first line of each failure)
// is logged and written to $KUBEXM_CONFORMANCE_OUT/summary.md; any failed
// spec fails the test.
func TestConformance(t *testing.T) {
	if os.Getenv(envConformance) != "1" {
		t.Skipf("%s=1 runs Kubernetes' conformance suite (make conformance, about an hour)", envConformance)
	}
	mode := envChoice(t, envConformanceMode, "binary", "kubeadm")
	specSet := os.Getenv(envConformanceSet)
	if specSet == "" {
		specSet = "parallel"
	}
	cni := envChoice(t, envConformanceCNI, "flannel", "calico")
	runtimeType := envChoice(t, envConformanceRuntime, "containerd", "docker")
	sets, err := conformanceSets(specSet, cni)
	if err != nil {
		t.Fatalf("%s=%q: %v", envConformanceSet, specSet, err)
	}
	focus, skip, nodes := joinSets(sets)
	if v := os.Getenv(envConformanceNodes); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", envConformanceNodes, v)
		}
		if specSet == "serial" && n != 1 {
			t.Fatalf("%s=%d with %s=serial: the serial set runs in one ginkgo process", envConformanceNodes, n, envConformanceSet)
		}
		nodes = n
	}
	cache := os.Getenv("KUBEXM_TEST_CACHE")
	if cache == "" {
		cache = "/var/cache/kubexm-test"
	}
	out := os.Getenv(envConformanceOut)
	if out == "" {
		out = filepath.Join(cache, "conformance", conformanceRunName(mode, cni, runtimeType, specSet))
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 170*time.Minute)
	defer cancel()
	root := moduleRoot(t)
	work := t.TempDir()
	skips := readSkipFile(t, filepath.Join(root, "test", "conformance", "skip.txt"))

	releaseRoot := clusterArtifacts(ctx, t, root)
	if mode == "kubeadm" {
		kubeadmArtifacts(ctx, t, root, kubernetesVersion)
	}
	if cni == "calico" {
		calicoArtifacts(ctx, t, root)
	}
	if runtimeType == "docker" {
		dockerArtifacts(ctx, t, root)
	}
	suiteDir := conformanceArtifacts(ctx, t, root)
	images := conformanceImages(t, filepath.Join(releaseRoot, "images", "images.txt"))
	bin := buildKubexm(ctx, t, root, work)
	kubectl := filepath.Join(releaseRoot, "kubernetes", "release", kubernetesVersion, "bin", "linux", "amd64", "kubectl")

	set, diag := suiteMachines(ctx, t, 3, "f", "KUBELET=1")
	if len(set.Hosts) != 3 {
		t.Fatalf("want 3 machines, have %d", len(set.Hosts))
	}
	name := "e2e-conf-" + mode
	y := kubernetesClusterYAML(name, set)
	vars := clusterTestVars()
	if mode == "kubeadm" {
		y = kubeadmClusterYAML(name, set, "kubeadm")
		vars = append(vars, fmt.Sprintf(`{"kubeadm_etcd_image_version": %q}`, kubeadmEtcdImageTag),
			`{"kubeadm_ignore_preflight_errors": ["SystemVerification"]}`)
	}
	y = conformanceClusterYAML(t, y, cni, runtimeType)
	var exportFlags []string
	if runtimeType == "docker" {
		installTestRunc(ctx, t, set)
		vars = append(vars, dockerTestVars()...)
	}
	// The suite's images travel in the bundle as a site's own images would
	// (images_extra), beside clusterTestVars' busybox.
	extra, err := json.Marshal(map[string]any{"images_extra": append([]map[string]string{
		{"name": "busybox", "repo": "docker.io/library/busybox", "tag": "1.35.0"}}, images.extra...)})
	if err != nil {
		t.Fatal(err)
	}
	vars = append(vars, string(extra))
	inventory := filepath.Join(work, "cluster.yaml")
	if err := os.WriteFile(inventory, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	kx := kubexm{bin: bin, dir: work, inventory: inventory, extra: extraVars(vars...), observe: diag.observe}
	kubeconfig := filepath.Join(work, ".kubexm", name, "kubeconfig")
	k := kubectlRunner{bin: kubectl, kubeconfig: kubeconfig}
	diag.cluster(k)

	server, stop := serveDirStoppable(t, set.Gateway, releaseRoot)
	if runtimeType == "docker" {
		exportFlags = append(exportFlags, "-e", dockerSources(server))
	}
	bundle := exportBundle(ctx, t, kx, server, " (conformance, "+mode+", "+cni+", "+runtimeType+")", exportFlags...)
	stop()
	res := kx.play(ctx, filepath.Join(root, "playbooks", "create-cluster"), "--offline-bundle", bundle)
	if res.err != nil {
		t.Fatalf("create-cluster failed after %s: %v%s", res.wall, res.err, res.failures())
	}
	t.Logf("PERF create-cluster (%s mode, %s, %s, conformance images in the bundle): %s", mode, cni, runtimeType, res.wall.Round(time.Second))
	checkNodes(ctx, t, k, set)
	// The cluster is what the settings asked for before the suite is
	// counted as run on it.
	if cni == "calico" {
		checkCalico(ctx, t, set, k, "vxlan")
	}
	if runtimeType == "docker" {
		var nodes []string
		for _, h := range set.Hosts {
			nodes = append(nodes, h.Name)
		}
		checkDockerNodes(ctx, t, k, set, nodes)
	}
	if t.Failed() {
		return
	}

	repoList := filepath.Join(work, "repo-list.yaml")
	if err := os.WriteFile(repoList, []byte(images.repoList), 0o644); err != nil {
		t.Fatal(err)
	}
	if v := os.Getenv(envConformanceFocus); v != "" {
		focus = v
	}
	if v := os.Getenv(envConformanceSkip); v != "" {
		skip = v
	}
	var skipRes []string
	for _, s := range skips {
		skipRes = append(skipRes, s.re)
	}
	if skip != "" {
		skipRes = append([]string{skip}, skipRes...)
	}
	ginkgoSkip := strings.Join(skipRes, "|")
	old, _ := filepath.Glob(filepath.Join(out, "*_report.json"))
	for _, f := range append([]string{"report.json", "ginkgo.log", "summary.md"}, old...) {
		_ = os.Remove(filepath.Join(out, filepath.Base(f)))
	}
	logPath := filepath.Join(out, "ginkgo.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	args := []string{"--nodes=" + strconv.Itoa(nodes), "--no-color", "--timeout=150m", "--focus=" + focus}
	if ginkgoSkip != "" {
		args = append(args, "--skip="+ginkgoSkip)
	}
	args = append(args, "--output-dir="+out, "--json-report=report.json",
		filepath.Join(suiteDir, "e2e.test"), "--",
		"--kubeconfig="+kubeconfig, "--provider=skeleton", "--kubectl-path="+kubectl)
	cmd := exec.CommandContext(ctx, filepath.Join(suiteDir, "ginkgo"), args...)
	cmd.Env = append(os.Environ(), "KUBE_TEST_REPO_LIST="+repoList)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Dir = work
	t.Logf("conformance: ginkgo %s (KUBE_TEST_REPO_LIST=%s), output in %s", strings.Join(args, " "), repoList, logPath)
	start := time.Now()
	runErr := cmd.Run()
	took := time.Since(start)

	sum, err := summarizeConformance(filepath.Join(out, "report.json"), focus, skip, skips)
	if err != nil {
		t.Fatalf("ginkgo: %v; no report (%v); the end of %s:\n%s", runErr, err, logPath, tailFile(logPath, 40))
	}
	sum.mode, sum.set, sum.cni, sum.runtime, sum.took, sum.nodes = mode, specSet, cni, runtimeType, took, nodes
	if len(sets) > 1 {
		// Each set's own counts, from the same report.
		for _, st := range sets {
			part, err := summarizeConformance(filepath.Join(out, "report.json"), st.focus, st.skip, skips)
			if err != nil {
				t.Fatal(err)
			}
			sum.parts = append(sum.parts, fmt.Sprintf("%s set: passed %d, failed %d, skipped (skip file) %d, skipped by the suite %d",
				st.name, part.passed, len(part.failed), len(part.skipFile), part.other))
		}
	}
	sum.command = fmt.Sprintf("ginkgo --nodes=%d --focus='%s' --skip='%s' e2e.test -- --provider=skeleton", nodes, focus, ginkgoSkip)
	text := sum.markdown()
	if err := os.WriteFile(filepath.Join(out, "summary.md"), []byte(text), 0o644); err != nil {
		t.Error(err)
	}
	t.Logf("conformance summary (%s):\n%s", filepath.Join(out, "summary.md"), text)
	if len(sum.failed) > 0 || runErr != nil {
		t.Errorf("conformance (%s mode): %d failed, %d passed; ginkgo: %v", mode, len(sum.failed), sum.passed, runErr)
	}
}

// specSet is one selection of specs TestConformance runs.
type specSet struct {
	name, focus, skip string
	nodes             int // ginkgo processes by default
}

// conformanceSets reads KUBEXM_CONFORMANCE_SET: one set, or parallel and
// netpol joined by "+" (one ginkgo run over both on one cluster; the
// serial set runs alone). netpol needs a CNI that enforces policy.
func conformanceSets(value, cni string) ([]specSet, error) {
	known := map[string]specSet{
		"parallel": {"parallel", conformanceFocus, conformanceSkip, 4},
		"serial":   {"serial", conformanceSerialFocus, conformanceSerialSkip, 1},
		"netpol":   {"netpol", conformanceNetpolFocus, conformanceNetpolSkip, 4},
	}
	var sets []specSet
	for _, name := range strings.Split(value, "+") {
		st, ok := known[name]
		if !ok {
			return nil, fmt.Errorf("unknown set %q: want parallel, serial, netpol or parallel+netpol", name)
		}
		if name == "netpol" && cni == "flannel" {
			return nil, fmt.Errorf("flannel enforces no NetworkPolicy, so the netpol specs would only fail; set %s=calico", envConformanceCNI)
		}
		if slices.ContainsFunc(sets, func(s specSet) bool { return s.name == name }) {
			return nil, fmt.Errorf("set %q given twice", name)
		}
		sets = append(sets, st)
	}
	if len(sets) > 1 && slices.ContainsFunc(sets, func(s specSet) bool { return s.name == "serial" }) {
		return nil, fmt.Errorf("the serial set runs alone (one ginkgo process, nothing else on the cluster)")
	}
	return sets, nil
}

// joinSets is one ginkgo selection of sets: a spec any set focuses on,
// unless any set's skip matches it (the parallel and netpol sets' skips
// match none of the other's specs), in the most processes any set takes.
func joinSets(sets []specSet) (focus, skip string, nodes int) {
	var f, s []string
	for _, st := range sets {
		f = append(f, st.focus)
		if st.skip != "" {
			s = append(s, st.skip)
		}
		nodes = max(nodes, st.nodes)
	}
	return strings.Join(f, "|"), strings.Join(s, "|"), nodes
}

// conformanceRunName names a run's output directory: the mode, then what
// differs from the default cluster and set (binary, binary-serial,
// kubeadm-calico-netpol, kubeadm-calico-parallel-netpol, binary-docker).
func conformanceRunName(mode, cni, runtimeType, set string) string {
	name := mode
	if cni != "flannel" {
		name += "-" + cni
	}
	if runtimeType != "containerd" {
		name += "-" + runtimeType
	}
	if set != "parallel" {
		name += "-" + strings.ReplaceAll(set, "+", "-")
	}
	return name
}

// conformanceClusterYAML puts the CNI and the container runtime into the
// cluster.yaml of kubernetesClusterYAML or kubeadmClusterYAML.
func conformanceClusterYAML(t *testing.T, y, cni, runtimeType string) string {
	t.Helper()
	swap := func(old, new string) {
		t.Helper()
		if !strings.Contains(y, old) {
			t.Fatalf("the suite's cluster.yaml has no %q:\n%s", old, y)
		}
		y = strings.Replace(y, old, new, 1)
	}
	if cni != "flannel" {
		swap("    plugin: flannel\n", "    plugin: "+cni+"\n")
	}
	if runtimeType != "containerd" {
		swap("    containerRuntime: "+runtimeYAML("containerd")+"\n", "    containerRuntime: "+runtimeYAML(runtimeType)+"\n")
	}
	return y
}

// envChoice is the setting name, def when unset; a value that is neither
// def nor one of others fails the test.
func envChoice(t *testing.T, name, def string, others ...string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	if v != def && !slices.Contains(others, v) {
		t.Fatalf("%s=%q: want one of %s", name, v, strings.Join(append([]string{def}, others...), ", "))
	}
	return v
}

// calicoArtifacts adds calico's images (test/artifacts/calico.sh) to the
// release tree, as kubeadmArtifacts does for the kubeadm suite on calico.
func calicoArtifacts(ctx context.Context, t *testing.T, root string) {
	t.Helper()
	buildArtifact(ctx, t, root, []string{"GOARCH=amd64"}, "calico.sh", "images")
}

// conformanceArtifacts builds e2e.test, ginkgo and what the suite's images
// run (kubernetes.sh), and the images (images.sh conformance); returns the
// directory of e2e.test and ginkgo.
func conformanceArtifacts(ctx context.Context, t *testing.T, root string) string {
	t.Helper()
	var dir string
	for _, c := range [][]string{
		{"kubernetes.sh", "e2e.test", "ginkgo", "agnhost", "sample-apiserver", "nonewprivs"},
		{"images.sh", "conformance"},
	} {
		last := buildArtifact(ctx, t, root, []string{"KUBE_VERSION=" + kubernetesVersion, "ETCD_VERSION=" + etcdVersion, "GOARCH=amd64"}, c[0], c[1:]...)
		if c[0] == "kubernetes.sh" {
			dir = last
		}
	}
	return dir
}

// suiteImages are the conformance images of images.txt: as images_extra
// entries, and the KUBE_TEST_REPO_LIST that names their registries.
type suiteImages struct {
	extra    []map[string]string
	repoList string
}

// conformanceImages reads images.sh's e2e-* tarballs from images.txt
// ("<name>-<tag>-<arch>.tar <repo>:<tag>"). The registry of agnhost's
// reference (<registry>/e2e-test-images/agnhost) is the suite's
// promoterE2eRegistry and, without the path, its gcEtcdRegistry.
func conformanceImages(t *testing.T, path string) suiteImages {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var s suiteImages
	registry := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 2 || !strings.HasPrefix(fields[0], "e2e-") {
			continue
		}
		file, ref := fields[0], fields[1]
		i := strings.LastIndex(ref, ":")
		if i < 0 {
			t.Fatalf("%s: %q has no tag", path, ref)
		}
		repo, tag := ref[:i], ref[i+1:]
		name := strings.TrimSuffix(file, "-"+tag+"-amd64.tar")
		if name == file {
			t.Fatalf("%s: %s is not <name>-%s-amd64.tar", path, file, tag)
		}
		s.extra = append(s.extra, map[string]string{"name": name, "repo": repo, "tag": tag})
		if name == "e2e-agnhost" {
			registry = strings.TrimSuffix(repo, "/e2e-test-images/agnhost")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if registry == "" {
		t.Fatalf("%s lists no e2e-agnhost image (test/artifacts/images.sh conformance)", path)
	}
	// pause stays registry.k8s.io's name: images.sh builds it as upstream
	// does, and the cluster has it already.
	s.repoList = fmt.Sprintf("promoterE2eRegistry: %s/e2e-test-images\ngcEtcdRegistry: %s\n", registry, registry)
	return s
}

// skipEntry is one line of test/conformance/skip.txt.
type skipEntry struct {
	re     string
	match  *regexp.Regexp
	reason string
}

// readSkipFile reads "<regular expression>  # <reason>" lines; blank lines
// and lines starting with # are comments. A line without a reason, or
// whose expression does not compile, fails the test naming file:line.
func readSkipFile(t *testing.T, path string) []skipEntry {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []skipEntry
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		re, reason, ok := strings.Cut(line, " # ")
		re, reason = strings.TrimSpace(re), strings.TrimSpace(reason)
		if !ok || reason == "" {
			t.Fatalf("%s:%d: want \"<regular expression> # <reason>\"", path, i+1)
		}
		m, err := regexp.Compile(re)
		if err != nil {
			t.Fatalf("%s:%d: %v", path, i+1, err)
		}
		out = append(out, skipEntry{re: re, match: m, reason: reason})
	}
	return out
}

// ginkgoSpec is the part of a spec report of ginkgo's --json-report
// (types.SpecReport) the summary needs.
type ginkgoSpec struct {
	ContainerHierarchyTexts []string
	LeafNodeText            string
	LeafNodeType            string
	State                   string
	RunTime                 int64 // nanoseconds
	Failure                 struct {
		Message  string
		Location struct {
			FileName   string
			LineNumber int
		}
	}
}

type ginkgoReport struct {
	SuiteDescription           string
	SpecialSuiteFailureReasons []string // "Interrupted by User", ...
	SpecReports                []ginkgoSpec
}

// conformanceSummary counts the specs of one run.
type conformanceSummary struct {
	mode, set, command string
	cni, runtime       string
	parts              []string // each set's counts when the run had several
	took               time.Duration
	nodes              int
	passed             int
	failed             []string // "<spec>: <first line of the failure> (<file>:<line>)"
	skipFile           []string // "<spec>: <reason>"
	other              int      // selected specs neither passed nor failed (skipped at run time)
	notSelected        int
	stopped            []string // why the suite stopped early, from ginkgo's report
}

// summarizeConformance reads ginkgo's JSON report: a spec is selected when
// its text matches focus and not skip; a selected spec matching the skip
// file counts as skipped with the reason.
func summarizeConformance(path, focus, skip string, skips []skipEntry) (*conformanceSummary, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var reports []ginkgoReport
	if err := json.Unmarshal(data, &reports); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(reports) == 0 {
		// A ginkgo stopped by a signal leaves its merged report empty and
		// each suite's own report (<suite path>_report.json) beside it.
		reports, err = suiteReports(filepath.Dir(path))
		if err != nil {
			return nil, err
		}
		if len(reports) == 0 {
			return nil, fmt.Errorf("%s lists no suite, and no suite's own report is beside it: ginkgo stopped before it reported", path)
		}
	}
	focusRe, err := regexp.Compile(focus)
	if err != nil {
		return nil, fmt.Errorf("focus %q: %w", focus, err)
	}
	// An empty skip leaves nothing out (an empty expression would match
	// every spec).
	var skipRe *regexp.Regexp
	if skip != "" {
		if skipRe, err = regexp.Compile(skip); err != nil {
			return nil, fmt.Errorf("skip %q: %w", skip, err)
		}
	}
	s := &conformanceSummary{}
	for _, r := range reports {
		s.stopped = append(s.stopped, r.SpecialSuiteFailureReasons...)
		for _, sp := range r.SpecReports {
			if sp.LeafNodeType != "It" {
				// Suite setup and teardown nodes: a failure there is reported
				// on the specs too, or ends the run.
				if sp.State == "failed" || sp.State == "panicked" || sp.State == "timedout" {
					s.failed = append(s.failed, fmt.Sprintf("%s (suite node): %s", sp.LeafNodeType, firstLine(sp.Failure.Message)))
				}
				continue
			}
			text := strings.TrimSpace(strings.Join(append(slices.Clone(sp.ContainerHierarchyTexts), sp.LeafNodeText), " "))
			if !focusRe.MatchString(text) || skipRe != nil && skipRe.MatchString(text) {
				s.notSelected++
				continue
			}
			if i := slices.IndexFunc(skips, func(e skipEntry) bool { return e.match.MatchString(text) }); i >= 0 {
				s.skipFile = append(s.skipFile, fmt.Sprintf("%s: %s", text, skips[i].reason))
				continue
			}
			switch sp.State {
			case "passed":
				s.passed++
			case "failed", "panicked", "timedout", "interrupted", "aborted":
				s.failed = append(s.failed, fmt.Sprintf("%s: %s (%s:%d)", text, firstLine(sp.Failure.Message),
					filepath.Base(sp.Failure.Location.FileName), sp.Failure.Location.LineNumber))
			default:
				s.other++
			}
		}
	}
	return s, nil
}

// suiteReports reads the per-suite reports (*_report.json) ginkgo leaves in
// dir.
func suiteReports(dir string) ([]ginkgoReport, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*_report.json"))
	if err != nil {
		return nil, err
	}
	var all []ginkgoReport
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var r []ginkgoReport
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		all = append(all, r...)
	}
	return all, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// markdown is the summary as docs/conformance.md quotes it.
func (s *conformanceSummary) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Kubernetes %s conformance (%s set), %s mode, %s, %s, 1 master + 2 workers (%s/%s), %s, %d ginkgo processes\n\n",
		kubernetesVersion, s.set, s.mode, s.cni, s.runtime, runtime.GOOS, runtime.GOARCH, time.Now().UTC().Format("2006-01-02 15:04 MST"), s.nodes)
	if len(s.stopped) > 0 {
		fmt.Fprintf(&b, "- **stopped early** (%s): the counts are of the specs that ran\n", strings.Join(s.stopped, "; "))
	}
	fmt.Fprintf(&b, "- passed: %d\n- failed: %d\n- skipped (test/conformance/skip.txt): %d\n", s.passed, len(s.failed), len(s.skipFile))
	if s.other > 0 {
		fmt.Fprintf(&b, "- skipped by the suite itself at run time: %d\n", s.other)
	}
	for _, p := range s.parts {
		fmt.Fprintf(&b, "- %s\n", p)
	}
	fmt.Fprintf(&b, "- not selected: %d\n- suite wall time: %s\n- command: `%s`\n", s.notSelected, s.took.Round(time.Second), s.command)
	if len(s.failed) > 0 {
		b.WriteString("\nFailed:\n")
		for _, f := range s.failed {
			fmt.Fprintf(&b, "- %s\n", f)
		}
	}
	if len(s.skipFile) > 0 {
		b.WriteString("\nSkipped by the skip file:\n")
		for _, f := range s.skipFile {
			fmt.Fprintf(&b, "- %s\n", f)
		}
	}
	return b.String()
}

// tailFile is the last n lines of a file, or why there are none.
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return tail(string(data), n)
}

// TestConformanceSummary counts a ginkgo JSON report as TestConformance
// does: selection by focus and skip, the skip file's reasons, failures
// with their first line, suite nodes' failures.
func TestConformanceSummary(t *testing.T) {
	report := `[{"SuiteDescription": "Kubernetes e2e suite", "SpecReports": [
	{"ContainerHierarchyTexts": ["[sig-node] Pods"], "LeafNodeText": "should run [Conformance]", "LeafNodeType": "It", "State": "passed"},
	{"ContainerHierarchyTexts": ["[sig-apps] StatefulSet"], "LeafNodeText": "should scale [Conformance]", "LeafNodeType": "It", "State": "failed",
	 "Failure": {"Message": "timed out waiting\nmore detail", "Location": {"FileName": "/x/statefulset.go", "LineNumber": 42}}},
	{"ContainerHierarchyTexts": ["[sig-node] Kubelet"], "LeafNodeText": "evicts [Serial] [Conformance]", "LeafNodeType": "It", "State": "skipped"},
	{"ContainerHierarchyTexts": ["[sig-storage] CSI"], "LeafNodeText": "mounts", "LeafNodeType": "It", "State": "skipped"},
	{"ContainerHierarchyTexts": ["[sig-cli] Kubectl"], "LeafNodeText": "update demo [Conformance]", "LeafNodeType": "It", "State": "skipped"},
	{"LeafNodeText": "", "LeafNodeType": "SynchronizedBeforeSuite", "State": "passed"}
	]}]`
	path := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	skipFile := filepath.Join(t.TempDir(), "skip.txt")
	if err := os.WriteFile(skipFile, []byte("# comment\n\nupdate demo # needs a registry\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := summarizeConformance(path, conformanceFocus, conformanceSkip, readSkipFile(t, skipFile))
	if err != nil {
		t.Fatal(err)
	}
	if s.passed != 1 || len(s.failed) != 1 || len(s.skipFile) != 1 || s.notSelected != 2 || s.other != 0 {
		t.Fatalf("passed %d, failed %q, skip file %q, not selected %d, other %d; want 1, 1, 1, 2, 0", s.passed, s.failed, s.skipFile, s.notSelected, s.other)
	}
	if want := "[sig-apps] StatefulSet should scale [Conformance]: timed out waiting (statefulset.go:42)"; s.failed[0] != want {
		t.Errorf("failure %q, want %q", s.failed[0], want)
	}
	if want := "[sig-cli] Kubectl update demo [Conformance]: needs a registry"; s.skipFile[0] != want {
		t.Errorf("skip %q, want %q", s.skipFile[0], want)
	}
	// The serial set selects the [Serial] spec alone, and its empty skip
	// leaves nothing out.
	s, err = summarizeConformance(path, conformanceSerialFocus, conformanceSerialSkip, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.passed != 0 || len(s.failed) != 0 || s.other != 1 || s.notSelected != 4 {
		t.Errorf("serial set: passed %d, failed %q, other %d, not selected %d; want 0, none, 1, 4", s.passed, s.failed, s.other, s.notSelected)
	}
	// A ginkgo stopped by a signal: an empty merged report, the suite's own
	// beside it.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "report.json"), []byte("[]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := summarizeConformance(filepath.Join(dir, "report.json"), conformanceFocus, conformanceSkip, nil); err == nil || !strings.Contains(err.Error(), "ginkgo stopped before it reported") {
		t.Errorf("an empty report and no suite's own: %v, want an error", err)
	}
	stopped := strings.Replace(report, `"SuiteDescription": "Kubernetes e2e suite",`, `"SuiteDescription": "Kubernetes e2e suite", "SpecialSuiteFailureReasons": ["Interrupted by User"],`, 1)
	if err := os.WriteFile(filepath.Join(dir, "var_cache_e2e_report.json"), []byte(stopped), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = summarizeConformance(filepath.Join(dir, "report.json"), conformanceFocus, conformanceSkip, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.passed != 1 || len(s.failed) != 1 || !strings.Contains(s.markdown(), "**stopped early** (Interrupted by User)") {
		t.Errorf("the suite's own report of a stopped run: passed %d, failed %q, summary:\n%s", s.passed, s.failed, s.markdown())
	}
	// The repository's skip file parses (each entry an expression and a reason).
	readSkipFile(t, filepath.Join(moduleRoot(t), "test", "conformance", "skip.txt"))
}

// TestConformanceClusterTemplate: each CNI and runtime setting of
// TestConformance gives a cluster.yaml that the built-in support matrix
// accepts, with the plugin and runtime asked for, in both modes; each run
// has an output directory of its own; the netpol set selects the
// NetworkPolicy specs and leaves out the SCTP ones and everything else.
func TestConformanceClusterTemplate(t *testing.T) {
	// The schema checks that the private key exists.
	key := filepath.Join(t.TempDir(), "id")
	if err := os.WriteFile(key, []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	set := &testhosts.Set{KeyPath: key, Gateway: "10.77.9.1"}
	for i := 1; i <= 3; i++ {
		set.Hosts = append(set.Hosts, testhosts.Host{Name: fmt.Sprintf("n%d", i), Address: fmt.Sprintf("10.77.9.%d", 10+i), Port: 22})
	}
	names := map[string]bool{}
	for _, mode := range []string{"binary", "kubeadm"} {
		for _, cni := range []string{"flannel", "calico"} {
			for _, rt := range []string{"containerd", "docker"} {
				y := kubernetesClusterYAML("e2e-conf", set)
				if mode == "kubeadm" {
					y = kubeadmClusterYAML("e2e-conf", set, "kubeadm")
				}
				y = conformanceClusterYAML(t, y, cni, rt)
				c, _, err := validate.ParseWith("cluster.yaml", []byte(y), nil)
				if err != nil {
					t.Errorf("%s, %s, %s: %v\n%s", mode, cni, rt, err, y)
				} else {
					k := c.Spec.Kubernetes
					if got := k.Type + " " + c.Spec.Network.Plugin + " " + k.ContainerRuntime.Type; got != map[string]string{"binary": "kubexm", "kubeadm": "kubeadm"}[mode]+" "+cni+" "+rt {
						t.Errorf("%s, %s, %s: kubernetes.type, network.plugin, containerRuntime.type %q", mode, cni, rt, got)
					}
				}
				for _, specSet := range []string{"parallel", "serial", "netpol", "parallel+netpol"} {
					n := conformanceRunName(mode, cni, rt, specSet)
					if names[n] {
						t.Errorf("two runs write to conformance/%s", n)
					}
					names[n] = true
				}
			}
		}
	}
	for _, n := range []string{"binary", "binary-serial", "kubeadm", "kubeadm-serial", "kubeadm-calico-netpol", "kubeadm-calico-parallel-netpol", "binary-docker"} {
		if !names[n] {
			t.Errorf("no run writes to conformance/%s", n)
		}
	}

	report := `[{"SuiteDescription": "Kubernetes e2e suite", "SpecReports": [
	{"ContainerHierarchyTexts": ["[sig-network] Netpol", "NetworkPolicy between server and client"], "LeafNodeText": "should support a 'default-deny-ingress' policy [Feature:NetworkPolicy]", "LeafNodeType": "It", "State": "passed"},
	{"ContainerHierarchyTexts": ["[sig-network] Netpol [LinuxOnly]", "NetworkPolicy between server and client using UDP"], "LeafNodeText": "should enforce policy based on Ports [Feature:NetworkPolicy]", "LeafNodeType": "It", "State": "passed"},
	{"ContainerHierarchyTexts": ["[sig-network] Netpol [Feature:SCTPConnectivity] [LinuxOnly]", "NetworkPolicy between server and client using SCTP"], "LeafNodeText": "should enforce policy based on Ports [Feature:NetworkPolicy]", "LeafNodeType": "It", "State": "skipped"},
	{"ContainerHierarchyTexts": ["[sig-network] Netpol API"], "LeafNodeText": "should support creating NetworkPolicy API operations [Conformance]", "LeafNodeType": "It", "State": "skipped"}
	]}]`
	path := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := summarizeConformance(path, conformanceNetpolFocus, conformanceNetpolSkip, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.passed != 2 || len(s.failed) != 0 || s.other != 0 || s.notSelected != 2 {
		t.Errorf("netpol set: passed %d, failed %q, other %d, not selected %d; want 2, none, 0, 2", s.passed, s.failed, s.other, s.notSelected)
	}
	// parallel+netpol: one selection of both (the API spec is the parallel
	// set's); the SCTP spec stays out.
	sets, err := conformanceSets("parallel+netpol", "calico")
	if err != nil {
		t.Fatal(err)
	}
	focus, skip, nodes := joinSets(sets)
	if s, err = summarizeConformance(path, focus, skip, nil); err != nil {
		t.Fatal(err)
	}
	if s.passed != 2 || s.other != 1 || s.notSelected != 1 || nodes != 4 {
		t.Errorf("parallel+netpol: passed %d, other %d, not selected %d, %d processes; want 2, 1, 1, 4", s.passed, s.other, s.notSelected, nodes)
	}
	for _, bad := range []struct{ set, cni, want string }{
		{"netpol", "flannel", "enforces no NetworkPolicy"},
		{"parallel+serial", "calico", "runs alone"},
		{"parallel+parallel", "calico", "given twice"},
		{"all", "calico", "unknown set"},
	} {
		if _, err := conformanceSets(bad.set, bad.cni); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("set %s with %s: %v, want an error saying %q", bad.set, bad.cni, err, bad.want)
		}
	}
}
