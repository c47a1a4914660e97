//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/test/testhosts"
)

// The docker runtime's versions test/artifacts/docker.sh builds: the static
// release's (the CLI's) and cri-dockerd's.
const (
	dockerVersion     = "29.9.3"
	criDockerdVersion = "0.4.3"
)

// These run a suite's cluster on another container runtime: TestNodes'
// (docker: make e2e-nodes-docker) and TestKubeadmCluster's (docker: make
// e2e-kubeadm-docker); unset or containerd, on containerd.
const (
	envNodesRuntime   = "KUBEXM_E2E_NODES_RUNTIME"
	envKubeadmRuntime = "KUBEXM_E2E_KUBEADM_RUNTIME"
)

// suiteRuntime is the container runtime env names for a suite.
func suiteRuntime(t *testing.T, env string) string {
	t.Helper()
	switch r := os.Getenv(env); r {
	case "", "containerd":
		return "containerd"
	case "docker":
		return r
	default:
		t.Fatalf("%s=%s: want containerd or docker", env, r)
		return ""
	}
}

// runtimeYAML is cluster.yaml's containerRuntime for runtime.
func runtimeYAML(runtime string) string {
	if runtime == "docker" {
		return runtimeYAMLAt(runtime, dockerVersion)
	}
	return runtimeYAMLAt(runtime, containerdVersion)
}

// runtimeYAMLAt is runtimeYAML at another version of the runtime.
func runtimeYAMLAt(runtime, version string) string {
	return "{type: " + runtime + ", version: " + version + "}"
}

// dockerArtifacts builds (or finds cached) docker's static release and
// cri-dockerd's (test/artifacts/docker.sh) in the release directory.
func dockerArtifacts(ctx context.Context, t *testing.T, root string) {
	t.Helper()
	buildArtifact(ctx, t, root, []string{"GOARCH=amd64"}, "docker.sh")
}

// testRuncOOM is where dockerTestVars' runtime wrapper lives on the test
// machines.
const testRuncOOM = "/usr/local/sbin/kubexm-test-runc"

// installTestRunc puts on every machine the runtime dockerd runs containers
// with on the test machines (dockerTestVars): runc, with the OOM score
// adjustments below 0 that the kubelet and cri-dockerd ask for (-998 for
// sandboxes, -997 for guaranteed pods) raised to 0, since the machines
// have no CAP_SYS_RESOURCE (containerd_restrict_oom_score_adj does this
// for containerd; dockerd has no such setting). It is the suite's file, not
// kubexm's: delete leaves it.
func installTestRunc(ctx context.Context, t *testing.T, set *testhosts.Set) {
	t.Helper()
	const script = `#!/bin/sh
# kubexm e2e: runc with negative oomScoreAdj raised to 0 (no CAP_SYS_RESOURCE here).
prev=
for a in "$@"; do
  case $prev in
  --bundle | -b) [ -f "$a/config.json" ] && sed -i 's/"oomScoreAdj":-[0-9]*/"oomScoreAdj":0/' "$a/config.json" ;;
  --process | -p) [ -f "$a" ] && sed -i 's/"oomScoreAdj":-[0-9]*/"oomScoreAdj":0/' "$a" ;;
  esac
  prev=$a
done
exec /usr/local/sbin/runc "$@"
`
	for _, h := range set.Hosts {
		if out, err := set.SSH(ctx, h.Name, "mkdir -p /usr/local/sbin && cat >"+testRuncOOM+" <<'EOF'\n"+script+"EOF\nchmod 0755 "+testRuncOOM); err != nil {
			t.Fatalf("%s: install %s: %v\n%s", h.Name, testRuncOOM, err, out)
		}
	}
}

// dockerTestVars are what the test machines need with docker: the runc
// wrapper of installTestRunc as dockerd's default runtime, and docker's
// data root removed by delete (delete_packages), so that a removed node is
// left as found.
func dockerTestVars() []string {
	return []string{
		`{"docker_extra_config": {"runtimes": {"kubexm-test-runc": {"path": "` + testRuncOOM + `"}}, "default-runtime": "kubexm-test-runc"}}`,
		"delete_packages=true",
	}
}

// dockerSources points docker's and cri-dockerd's downloads at the file
// server (test/artifacts/docker.sh lays them out as upstream does).
func dockerSources(server string) string {
	return `{"docker_mirrors": ["` + server + `/linux/static/stable/x86_64"],` +
		` "cri_dockerd_mirrors": ["` + server + `/Mirantis/cri-dockerd/releases/download/v` + criDockerdVersion + `"]}`
}

// checkDockerNodes: every node's kubelet runs on docker through
// cri-dockerd (the Node's container runtime, the kubelet's endpoint), `docker
// ps` on the node lists the pods' containers, and crictl, configured for
// cri-dockerd's socket, lists them too.
func checkDockerNodes(ctx context.Context, t *testing.T, k kubectlRunner, set *testhosts.Set, nodes []string) {
	t.Helper()
	for _, n := range nodes {
		if rt, err := k.run(ctx, "", "get", "node", n, "-o", "jsonpath={.status.nodeInfo.containerRuntimeVersion}"); err != nil || !strings.HasPrefix(rt, "docker://") {
			t.Errorf("node %s: container runtime %q (%v), want docker", n, rt, err)
		}
		out, err := set.SSH(ctx, n, "grep -h cri-dockerd.sock /var/lib/kubelet/config.yaml /etc/crictl.yaml; systemctl is-active docker cri-docker.service cri-docker.socket containerd")
		if err != nil || strings.Count(out, "unix:///run/cri-dockerd.sock") < 3 || strings.Count(out, "active\n") != 4 {
			t.Errorf("%s: the kubelet's and crictl's endpoint, the units: %v\n%s", n, err, out)
		}
		// Pods' containers carry cri-dockerd's io.kubernetes.* labels.
		out, err = set.SSH(ctx, n, "docker ps --filter label=io.kubernetes.pod.namespace --format '{{.Names}}'")
		if err != nil || !strings.Contains(out, "k8s_") {
			t.Errorf("%s: docker ps lists no pod container: %v\n%s", n, err, out)
		}
		out, err = set.SSH(ctx, n, "crictl ps --state running -o json | grep -c '\"id\"'; crictl info >/dev/null && echo info-ok")
		if err != nil || !strings.Contains(out, "info-ok") || strings.HasPrefix(out, "0\n") {
			t.Errorf("%s: crictl ps through cri-dockerd: %v\n%s", n, err, out)
		}
	}
}

// dockerLeftovers is a shell command printing what docker and cri-dockerd
// left on a host (nothing on a host kubexm removed them from).
const dockerLeftovers = `for p in /etc/docker /var/lib/docker /var/lib/cri-dockerd /run/docker /run/docker.sock /run/cri-dockerd.sock /usr/local/bin/docker /usr/local/bin/dockerd /usr/local/bin/docker-proxy /usr/local/bin/cri-dockerd /etc/systemd/system/docker.service /etc/systemd/system/cri-docker.service /etc/systemd/system/cri-docker.socket; do [ -e $p ] && echo "left $p"; done; ` +
	`pgrep -x 'dockerd|cri-dockerd|docker-proxy' || true; ip link show docker0 2>/dev/null; iptables-save | grep -i docker || true; `

// TestDockerTemplates: with containerRuntime.type docker, daemon.json holds
// cluster.yaml's settings (cgroup driver, data root, containerd's socket,
// mirrors, insecure registries, log rotation, the extra config merged over
// them); cri-dockerd's unit names CNI and the cluster's pause image; the
// kubelet (binary mode), kubeadm (criSocket) and crictl use cri-dockerd's
// socket, and containerd's otherwise.
func TestDockerTemplates(t *testing.T) {
	docker := func(spec map[string]any) {
		k := spec["kubernetes"].(map[string]any)
		k["containerRuntime"] = map[string]any{"type": "docker", "version": dockerVersion,
			"docker": map[string]any{"registryMirrors": []any{"mirror.example.com", "http://m2.example.com:5000"}, "insecureRegistries": []any{"insecure.example.com"}}}
		spec["registry"] = map[string]any{"containerdDataDir": "/var/lib/containerd", "dockerDataDir": "/data/docker",
			"auths": map[string]any{"plain.example.com": map[string]any{"plainHTTP": true}, "tls.example.com": map[string]any{"skipTLSVerify": true}, "reg.local": map[string]any{"username": "u"}}}
	}
	v := kubeVars("n2", docker)
	v["docker_extra_config"] = map[string]any{"bip": "192.168.200.1/24", "log-opts": map[string]any{"max-file": "3"}}
	v = withDefaults(t, "docker", v)
	var cfg map[string]any
	out := renderRoleTemplate(t, "docker", "daemon.json.tmpl", v)
	if err := json.Unmarshal([]byte(out), &cfg); err != nil {
		t.Fatalf("daemon.json is not JSON: %v\n%s", err, out)
	}
	for key, want := range map[string]any{
		"exec-opts":           []any{"native.cgroupdriver=systemd"},
		"data-root":           "/data/docker",
		"containerd":          "/run/containerd/containerd.sock",
		"hosts":               []any{"unix:///run/docker.sock"},
		"features":            map[string]any{"containerd-snapshotter": true},
		"live-restore":        true,
		"log-driver":          "json-file",
		"log-opts":            map[string]any{"max-size": "100m", "max-file": "3"},
		"registry-mirrors":    []any{"https://mirror.example.com", "http://m2.example.com:5000"},
		"insecure-registries": []any{"insecure.example.com", "plain.example.com", "tls.example.com"},
		"bip":                 "192.168.200.1/24",
	} {
		if !reflect.DeepEqual(cfg[key], want) {
			t.Errorf("daemon.json %s = %#v, want %#v\n%s", key, cfg[key], want, out)
		}
	}
	unit := renderRoleTemplate(t, "cri-dockerd", "cri-docker.service.tmpl", withDefaults(t, "cri-dockerd", kubeVarsWithPause(t, docker)))
	for _, want := range []string{"--network-plugin=cni", "--pod-infra-container-image registry.k8s.io/pause:3.10.2", "--docker-endpoint unix:///run/docker.sock", "--cni-bin-dir /opt/cni/bin"} {
		if !strings.Contains(unit, want) {
			t.Errorf("cri-docker.service lacks %q:\n%s", want, unit)
		}
	}
	socket := renderRoleTemplate(t, "cri-dockerd", "cri-docker.socket.tmpl", withDefaults(t, "cri-dockerd", kubeVarsWithPause(t, docker)))
	if !strings.Contains(socket, "ListenStream=/run/cri-dockerd.sock\n") {
		t.Errorf("cri-docker.socket:\n%s", socket)
	}

	for _, tc := range []struct {
		runtime func(spec map[string]any)
		want    string
	}{{docker, "unix:///run/cri-dockerd.sock"}, {nil, "unix:///run/containerd/containerd.sock"}} {
		join := renderRoleTemplate(t, "kubernetes/kubeadm", "kubeadm-join.yaml.tmpl", kubeadmVarsWith(t, "n2", tc.runtime, map[string]any{
			"kubeadm_join_token": "abcdef.0123456789abcdef", "kubeadm_join_ca_hash": "sha256:" + strings.Repeat("ab", 32),
		}))
		if nr := kubeadmDocs(t, join)["JoinConfiguration"]["nodeRegistration"].(map[string]any); nr["criSocket"] != tc.want {
			t.Errorf("kubeadm's criSocket %v, want %s", nr["criSocket"], tc.want)
		}
		crictl := renderRoleTemplate(t, "crictl", "crictl.yaml.tmpl", withDefaults(t, "crictl", kubeVars("n2", tc.runtime)))
		if !strings.Contains(crictl, "runtime-endpoint: \""+tc.want+"\"") {
			t.Errorf("crictl.yaml for %s:\n%s", tc.want, crictl)
		}
		node := withDefaults(t, "kubernetes/node", kubeVars("n2", tc.runtime))
		if ep := node["kubelet_container_runtime_endpoint"]; ep != tc.want {
			t.Errorf("the kubelet's containerRuntimeEndpoint %v, want %s", ep, tc.want)
		}
		// cri-dockerd's streaming URL has no scheme, which the kubelet's
		// WebSocket relay (v1.36+) does not take as HTTP.
		gates, _ := node["kubelet_feature_gates"].(map[string]any)
		if off, set := gates["ExtendWebSocketsToKubelet"]; (tc.runtime != nil) != set || (set && off != false) {
			t.Errorf("the kubelet's feature gates with %s: %#v", tc.want, node["kubelet_feature_gates"])
		}
	}
}

// kubeVarsWithPause is kubeVars of n2 with the shared pause_image (what
// the images' list makes of the catalogue: upstream's).
func kubeVarsWithPause(t *testing.T, adjust func(spec map[string]any)) map[string]any {
	t.Helper()
	v := kubeVars("n2", adjust)
	v["pause_image"] = "registry.k8s.io/pause:3.10.2"
	return v
}

// refusesForeignDocker: with a process named dockerd on host, whose
// docker.service is not kubexm's (a distribution's docker), preflight's
// runtime check of a docker cluster refuses it, naming it and the way to
// migrate, and passes the hosts of others: the cluster's nodes, whose
// docker kubexm installed, and a host running none.
func refusesForeignDocker(ctx context.Context, t *testing.T, kx kubexm, set *testhosts.Set, create, host string, others []string) {
	t.Helper()
	defer dockerdStandIn(ctx, t, set, host)()
	res := kx.play(ctx, create, "--tags=check-runtime")
	failures := res.failures()
	if res.err == nil || !strings.Contains(failures, host+" ") || !strings.Contains(failures, "already runs a docker that kubexm did not install") ||
		!strings.Contains(failures, "drain it") {
		t.Errorf("preflight with a foreign dockerd on %s: want it refused naming it: %v%s", host, res.err, failures)
	}
	for _, h := range others {
		if strings.Contains(failures, "node "+h+" ") {
			t.Errorf("preflight refused %s:%s", h, failures)
		}
	}
}

// checkDockerRegistryPull is issue 54's registry settings with docker: a
// registry the test runs (its own CA, htpasswd), filled by `kubexm artifact
// images push`, in registry.auths with certsPath and credentials (not as
// privateRegistry: the cluster's own images stay side-loaded);
// create-cluster --tags runtime gives dockerd the CA in
// /etc/docker/certs.d/<host>/ and the kubelet and cri-dockerd the
// credentials (0600, never in the run's output), a re-run changes nothing,
// and a pod of that image, with no imagePullSecrets, runs on every node.
// It ends with cluster.yaml as it was given.
func checkDockerRegistryPull(ctx context.Context, t *testing.T, kx kubexm, k kubectlRunner, set *testhosts.Set, root, work, clusterYAML, create, bundle string, nodes []string) {
	t.Helper()
	reg := startRegistry(ctx, t, root, set.Gateway, work)
	auths := fmt.Sprintf("    auths:\n      %q: {username: %s, password: %q, certsPath: %q}\n", reg.host, reg.user, reg.passwd, reg.caDir)

	// The push names the registry as privateRegistry, in a file of its own.
	pushInventory := filepath.Join(work, "cluster-docker-push.yaml")
	if err := os.WriteFile(pushInventory, []byte(strings.TrimRight(clusterYAML, "\n")+"\n  registry:\n    privateRegistry: "+strconv.Quote(reg.host)+"\n"+auths), 0o600); err != nil {
		t.Fatal(err)
	}
	pushDir := filepath.Join(work, "docker-push")
	placeImage(t, busyboxImage(ctx, t, t.TempDir()), pushDir)
	push := exec.CommandContext(ctx, kx.bin, "artifact", "images", "push", "-f", pushInventory, "--workdir", pushDir)
	push.Dir = work
	if out, err := push.CombinedOutput(); err != nil {
		t.Fatalf("kubexm artifact images push to %s: %v\n%s", reg.host, err, out)
	}

	if err := os.WriteFile(kx.inventory, []byte(strings.TrimRight(clusterYAML, "\n")+"\n  registry:\n"+auths), 0o600); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := os.WriteFile(kx.inventory, []byte(clusterYAML), 0o600); err != nil {
			t.Error(err)
		}
	}()
	res := kx.play(ctx, create, "--offline-bundle", bundle, "--tags", "runtime")
	if res.err != nil {
		t.Fatalf("create-cluster --tags runtime with the registry's certsPath and credentials: %v%s", res.err, res.failures())
	}
	t.Logf("PERF create-cluster --tags runtime, a registry's CA and credentials to %d docker nodes: %s (%d changed)", len(nodes), res.wall.Round(time.Millisecond), len(res.changed()))
	if strings.Contains(fmt.Sprintf("%+v", res.events)+res.stderr, reg.passwd) {
		t.Errorf("the run's output holds the registry's password")
	}
	rerun(ctx, t, kx, "create-cluster --tags runtime with the registry", create, "--offline-bundle", bundle, "--tags", "runtime")

	for _, n := range nodes {
		out, err := set.SSH(ctx, n, fmt.Sprintf(`stat -c '%%a %%n' /var/lib/kubelet/config.json /var/lib/cri-dockerd/.docker/config.json /etc/docker/certs.d/%s/ca.crt`, reg.host))
		want := fmt.Sprintf("600 /var/lib/kubelet/config.json\n600 /var/lib/cri-dockerd/.docker/config.json\n600 /etc/docker/certs.d/%s/ca.crt\n", reg.host)
		if err != nil || out != want {
			t.Errorf("%s: the registry's files:\n%s(%v)\nwant\n%s", n, out, err, want)
		}
	}
	ref := reg.host + "/e2e/busybox:latest"
	for i, n := range nodes {
		pod := fmt.Sprintf("docker-registry-pull-%d", i)
		manifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: default}
spec:
  nodeName: %s
  tolerations: [{operator: Exists}]
  restartPolicy: Never
  containers:
  - {name: c, image: %q, imagePullPolicy: Always, command: [/bin/busybox, sleep, "3600"]}
`, pod, n, ref)
		if out, err := k.run(ctx, manifest, "apply", "-f", "-"); err != nil {
			t.Fatalf("pod %s: %v\n%s", pod, err, out)
		}
		if out, err := k.run(ctx, "", "wait", "pod", pod, "--for=condition=Ready", "--timeout=120s"); err != nil {
			desc, _ := k.run(ctx, "", "describe", "pod", pod)
			t.Errorf("%s: a pod of %s (pulled with the kubelet's credentials through cri-dockerd) is not Ready: %v\n%s\n%s", n, ref, err, out, tail(desc, 25))
		}
		if out, err := k.run(ctx, "", "delete", "pod", pod, "--wait=false"); err != nil {
			t.Errorf("delete pod %s: %v\n%s", pod, err, out)
		}
	}
}
