//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm/engine/eval"
	"github.com/mensylisir/kubexm/test/testhosts"
	toml "github.com/pelletier/go-toml/v2"
)

// The versions test/artifacts/containerd.sh builds from the Go module proxy.
const (
	containerdVersion = "2.4.2"
	runcVersion       = "1.5.2"
	cniVersion        = "1.9.1"
	// test/artifacts/crictl.sh builds it from sigs.k8s.io/cri-tools.
	crictlVersion = "1.37.0"
)

// TestContainerd is the containerd part of issue 9 on two fresh machines:
//
//   - create-cluster --tags containerd installs containerd, runc and the CNI
//     plugins from release-shaped artifacts and starts the service;
//   - `ctr version` reaches server 2.4.2, the unit is active and config.toml
//     has SystemdCgroup = true;
//   - --check before it changes nothing; running it again reports 0 changed;
//   - a changed config.toml restarts the daemon (the handler);
//   - a busybox image built here is imported and `ctr run` prints hello;
//   - crictl is on every machine with /etc/crictl.yaml naming containerd's
//     socket: `crictl ps` lists the running container, on the machine and
//     through `kubexm run command -- crictl ps`;
//   - preflight refuses a machine that runs another runtime (a process named
//     dockerd) than cluster.yaml's containerd, naming it;
//   - a private registry the test runs (checkRegistryPull): kubexm artifact
//     images push fills it, the nodes pull from it with its CA and
//     credentials, a wrong password is refused at preflight; then
//     registry.type registry (checkRegistryRole): the registry deployed on
//     the first machine, filled and pulled from the same way, then made a
//     proxy cache of the test's registry (its own CA, its account), which
//     the machines pull through, also with that registry stopped;
//   - playbooks/delete --tags containerd, with a container still running,
//     removes the containers, the unit, the binaries and the data, and a
//     second delete changes nothing.
//
// It prints the wall time of the create and of the re-run (PERF lines).
func TestContainerd(t *testing.T) {
	parallelSuite(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	root := moduleRoot(t)
	work := t.TempDir()

	releaseRoot := containerdRelease(ctx, t, root)
	image := busyboxImage(ctx, t, work)
	bin := buildKubexm(ctx, t, root, work)

	set, diag := suiteMachines(ctx, t, 2, "c")
	server := serveDir(t, set.Gateway, releaseRoot)

	inventory := filepath.Join(work, "cluster.yaml")
	// The runtime goes into clusterYAML's kubernetes block.
	base := clusterYAML("e2e-containerd", set)
	cluster := strings.Replace(base, "    proxyMode: iptables\n",
		"    proxyMode: iptables\n    containerRuntime: {type: containerd, version: "+containerdVersion+"}\n", 1)
	if cluster == base {
		t.Fatal("clusterYAML has no kubernetes.proxyMode line to put the runtime after")
	}
	if err := os.WriteFile(inventory, []byte(cluster), 0o600); err != nil {
		t.Fatal(err)
	}
	kx := kubexm{
		bin: bin, dir: work, inventory: inventory, observe: diag.observe,
		extra: extraVars(
			// The artifact sources: the local stand-in for github.com.
			fmt.Sprintf(`{"containerd_mirrors": ["%s/containerd/containerd/releases/download/v%s"],`+
				` "runc_mirrors": ["%s/opencontainers/runc/releases/download/v%s"],`+
				` "cni_plugins_mirrors": ["%s/containernetworking/plugins/releases/download/v%s"],`+
				` "crictl_mirrors": ["%s/kubernetes-sigs/cri-tools/releases/download/v%s"]}`,
				server, containerdVersion, server, runcVersion, server, cniVersion, server, crictlVersion),
		),
	}
	create := filepath.Join(root, "playbooks", "create-cluster")
	del := filepath.Join(root, "playbooks", "delete")
	tags := "--tags=containerd"

	// --check on fresh machines: succeeds and changes nothing.
	wide := []string{"/etc", "/usr/local", "/opt", "/var/lib/containerd"}
	fresh := map[string]map[string]string{}
	for _, h := range set.Hosts {
		fresh[h.Name] = snapshot(ctx, t, set, h.Name, wide...)
	}
	res := kx.play(ctx, create, tags, "--check")
	if res.err != nil {
		t.Fatalf("create-cluster --tags containerd --check failed: %v%s", res.err, res.failures())
	}
	for _, h := range set.Hosts {
		if d := diffSnapshots(fresh[h.Name], snapshot(ctx, t, set, h.Name, wide...)); len(d) > 0 {
			t.Errorf("--check changed %s:\n  %s", h.Name, strings.Join(d, "\n  "))
		}
	}

	res = kx.play(ctx, create, tags)
	if res.err != nil {
		t.Fatalf("create-cluster --tags containerd failed after %s: %v%s", res.wall, res.err, res.failures())
	}
	t.Logf("PERF create-cluster --tags containerd on 2 fresh machines: %s (%d changed)", res.wall.Round(time.Millisecond), len(res.changed()))
	for _, h := range set.Hosts {
		checkContainerd(ctx, t, set, h.Name)
	}

	res = kx.play(ctx, create, tags)
	if res.err != nil {
		t.Fatalf("re-run failed: %v%s", res.err, res.failures())
	}
	t.Logf("PERF create-cluster --tags containerd re-run (nothing to change): %s", res.wall.Round(time.Millisecond))
	if c := res.changed(); len(c) > 0 {
		t.Errorf("re-run changed %d things, want 0:\n  %s", len(c), strings.Join(c, "\n  "))
	}

	// A changed config.toml restarts the daemon through the handler; the
	// run after that puts the default back.
	pids := map[string]string{}
	for _, h := range set.Hosts {
		pids[h.Name] = mainPID(ctx, t, set, h.Name)
	}
	res = kx.play(ctx, create, tags, "-e", "containerd_pause_tag=3.9")
	if res.err != nil {
		t.Fatalf("run with another sandbox image failed: %v%s", res.err, res.failures())
	}
	for _, h := range set.Hosts {
		if pid := mainPID(ctx, t, set, h.Name); pid == pids[h.Name] {
			t.Errorf("%s: containerd was not restarted after config.toml changed (pid %s)", h.Name, pid)
		}
		if out, err := set.SSH(ctx, h.Name, `grep -cE "pause:3[.]9['\"]\$" /etc/containerd/config.toml`); err != nil || out != "1\n" {
			t.Errorf("%s: config.toml does not have the new sandbox image: %q %v", h.Name, out, err)
		}
	}
	// Back to the defaults, with the artifacts from directories on the
	// control machine instead of the mirrors (the same files, so only
	// config.toml changes).
	res = kx.play(ctx, create, tags, "-e", fmt.Sprintf(`{"containerd_local_dir": "%s/containerd/containerd/releases/download/v%s",`+
		` "runc_local_dir": "%s/opencontainers/runc/releases/download/v%s",`+
		` "cni_plugins_local_dir": "%s/containernetworking/plugins/releases/download/v%s"}`,
		releaseRoot, containerdVersion, releaseRoot, runcVersion, releaseRoot, cniVersion))
	if res.err != nil {
		t.Fatalf("run back to the defaults from local directories failed: %v%s", res.err, res.failures())
	}
	for _, c := range res.changed() {
		if !strings.Contains(c, "containerd - configuration") && !strings.Contains(c, "containerd restarted") {
			t.Errorf("run back to the defaults from local directories changed more than config.toml: %s", c)
		}
	}
	for _, h := range set.Hosts {
		checkContainerd(ctx, t, set, h.Name)
	}

	// A container from an imported image, on every machine.
	for _, h := range set.Hosts {
		if err := upload(ctx, set, h.Name, image, "/root/busybox.tar"); err != nil {
			t.Fatal(err)
		}
		out, err := set.SSH(ctx, h.Name, "ctr image import /root/busybox.tar && ctr run --rm docker.io/e2e/busybox:latest e2e-hello echo hello")
		if err != nil {
			t.Fatalf("%s: import and run busybox: %v\n%s", h.Name, err, out)
		}
		if !strings.Contains(out, "hello\n") {
			t.Errorf("%s: ctr run printed %q, want hello", h.Name, out)
		}
	}
	// A container still running when the cluster is deleted.
	first := set.Hosts[0].Name
	if out, err := set.SSH(ctx, first, "ctr run -d docker.io/e2e/busybox:latest e2e-sleeper sleep 600"); err != nil {
		t.Fatalf("%s: start a long-running container: %v\n%s", first, err, out)
	}

	// crictl answers through containerd's CRI plugin on every machine,
	// directly and through kubexm run command (the containers ctr started
	// are in ctr's namespace, not the CRI's k8s.io: it lists none here).
	for _, h := range set.Hosts {
		checkCrictl(ctx, t, set, h.Name, "unix:///run/containerd/containerd.sock", "")
	}
	checkRunCrictl(ctx, t, bin, work, inventory, set)
	refusesOtherRuntime(ctx, t, kx, set, create)
	upstream, upInventory := checkRegistryPull(ctx, t, kx, set, root, cluster, image, create)
	checkRegistryRole(ctx, t, kx, set, cluster, image, server, create, del, upstream, upInventory)

	res = kx.play(ctx, del, tags)
	if res.err != nil {
		t.Fatalf("delete --tags containerd failed: %v%s", res.err, res.failures())
	}
	t.Logf("delete --tags containerd: %s", res.wall.Round(time.Millisecond))
	gone := []string{
		"/etc/systemd/system/containerd.service", "/etc/containerd",
		"/usr/local/bin/containerd", "/usr/local/bin/containerd-shim-runc-v2", "/usr/local/bin/ctr",
		"/usr/local/sbin/runc", "/opt/cni/bin/bridge", "/opt/cni", "/run/containerd",
		"/usr/local/bin/crictl", "/etc/crictl.yaml",
	}
	for _, h := range set.Hosts {
		out, err := set.SSH(ctx, h.Name, fmt.Sprintf(`for p in %s; do [ ! -e "$p" ] || echo "left: $p"; done
systemctl list-unit-files --no-legend containerd.service
ps -eo comm= | grep -E '^(containerd|sleep)' || true
ls -A /var/lib/containerd`, strings.Join(gone, " ")))
		if err != nil {
			t.Fatalf("%s: check after delete: %v", h.Name, err)
		}
		if strings.TrimSpace(out) != "" {
			t.Errorf("%s: after delete:\n%s", h.Name, out)
		}
	}
	res = kx.play(ctx, del, tags)
	if res.err != nil {
		t.Fatalf("second delete failed: %v%s", res.err, res.failures())
	}
	if c := res.changed(); len(c) > 0 {
		t.Errorf("a second delete changed %d things, want 0:\n  %s", len(c), strings.Join(c, "\n  "))
	}
}

// checkCrictl wants crictl at crictlVersion on host, its configuration
// naming endpoint, and `crictl ps` and `crictl version` answering through it
// without flags; with running set, `crictl ps` lists a running container of
// that name.
func checkCrictl(ctx context.Context, t *testing.T, set *testhosts.Set, host, endpoint, running string) {
	t.Helper()
	out, err := set.SSH(ctx, host, "crictl --version && cat /etc/crictl.yaml && crictl version && crictl ps -a")
	if err != nil {
		t.Errorf("%s: crictl: %v\n%s", host, err, out)
		return
	}
	for _, want := range []string{
		"crictl version v" + crictlVersion + "\n",
		"runtime-endpoint: \"" + endpoint + "\"\n",
		"RuntimeApiVersion:  v1\n",
		"CONTAINER ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("%s: crictl's output has no %q:\n%s", host, want, out)
		}
	}
	if running == "" {
		return
	}
	if out, err := set.SSH(ctx, host, "crictl ps --state running --name "+running+" -q"); err != nil || strings.TrimSpace(out) == "" {
		t.Errorf("%s: crictl ps lists no running %s container: %q %v", host, running, out, err)
	}
}

// refusesOtherRuntime: with a process named dockerd on the first machine,
// preflight's runtime check refuses it, naming docker and the way to
// migrate, and passes the other machine, which runs only containerd.
func refusesOtherRuntime(ctx context.Context, t *testing.T, kx kubexm, set *testhosts.Set, create string) {
	t.Helper()
	first := set.Hosts[0].Name
	defer dockerdStandIn(ctx, t, set, first)()
	res := kx.play(ctx, create, "--tags=check-runtime")
	failures := res.failures()
	if res.err == nil || !strings.Contains(failures, "already runs docker, and spec.kubernetes.containerRuntime.type is containerd") ||
		!strings.Contains(failures, "drain it") {
		t.Errorf("preflight with dockerd running on %s: want it refused naming docker: %v%s", first, res.err, failures)
	}
	for _, h := range set.Hosts[1:] {
		if strings.Contains(failures, h.Name+" ") {
			t.Errorf("preflight refused %s, which runs only containerd:%s", h.Name, failures)
		}
	}
}

// dockerdStandIn runs a process named dockerd (a copy of sleep) on host,
// for preflight's runtime check to find; the function returned stops it.
func dockerdStandIn(ctx context.Context, t *testing.T, set *testhosts.Set, host string) func() {
	t.Helper()
	pid, err := set.SSH(ctx, host, "cp /bin/sleep /tmp/dockerd || exit 1; /tmp/dockerd 600 >/dev/null 2>&1 </dev/null & echo $!")
	if err != nil || strings.TrimSpace(pid) == "" {
		t.Fatalf("%s: start a process named dockerd: %v %q", host, err, pid)
	}
	return func() {
		if out, err := set.SSH(ctx, host, "kill "+strings.TrimSpace(pid)+"; rm -f /tmp/dockerd"); err != nil {
			t.Errorf("%s: stop the dockerd stand-in: %v\n%s", host, err, out)
		}
	}
}

// checkRunCrictl runs `kubexm run command -- crictl ps` on every machine of
// inventory and wants each machine's listing.
func checkRunCrictl(ctx context.Context, t *testing.T, bin, dir, inventory string, set *testhosts.Set) {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, "run", "command", "-f", inventory, "--group", "k8s_cluster", "--", "crictl", "ps")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KUBEXM_HOME="+filepath.Join(dir, ".kubexm"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("kubexm run command --group k8s_cluster -- crictl ps: %v\n%s", err, out)
		return
	}
	for _, h := range set.Hosts {
		if !strings.Contains(string(out), h.Name) {
			t.Errorf("kubexm run command -- crictl ps does not show %s:\n%s", h.Name, out)
		}
	}
	if n := strings.Count(string(out), "CONTAINER "); n != len(set.Hosts) {
		t.Errorf("kubexm run command -- crictl ps: %d listings, want %d:\n%s", n, len(set.Hosts), out)
	}
}

// checkContainerd checks one machine's containerd: the server's version,
// the unit's state and the cgroup driver in config.toml.
func checkContainerd(ctx context.Context, t *testing.T, set *testhosts.Set, host string) {
	t.Helper()
	out, err := set.SSH(ctx, host, "ctr version")
	if err != nil {
		t.Fatalf("%s: ctr version: %v\n%s", host, err, out)
	}
	server, _, ok := strings.Cut(out, "Server:")
	if !ok || !strings.Contains(out[len(server):], "Version:  v"+containerdVersion) {
		t.Errorf("%s: ctr version does not show server %s:\n%s", host, containerdVersion, out)
	}
	if out, err := set.SSH(ctx, host, "systemctl is-active containerd; systemctl is-enabled containerd"); err != nil || out != "active\nenabled\n" {
		t.Errorf("%s: containerd is %q (%v), want active and enabled", host, out, err)
	}
	if out, err := set.SSH(ctx, host, "grep -c '^ *SystemdCgroup = true$' /etc/containerd/config.toml; runc --version; ls /opt/cni/bin | wc -l"); err != nil ||
		!strings.HasPrefix(out, "1\nrunc version "+runcVersion) || !strings.HasSuffix(out, "\n18\n") {
		t.Errorf("%s: SystemdCgroup count, runc version and CNI plugin count %q (%v), want 1, %s, 18", host, out, err, runcVersion)
	}
}

// mainPID is the process id of containerd.service on host.
func mainPID(ctx context.Context, t *testing.T, set *testhosts.Set, host string) string {
	t.Helper()
	out, err := set.SSH(ctx, host, "systemctl show --value -p MainPID containerd.service")
	if err != nil {
		t.Fatalf("%s: MainPID of containerd: %v", host, err)
	}
	pid := strings.TrimSpace(out)
	if pid == "" || pid == "0" {
		t.Fatalf("%s: containerd is not running (MainPID %q)", host, pid)
	}
	return pid
}

// containerdRelease lays out the containerd, runc and CNI plugin releases
// with test/artifacts/containerd.sh and returns the directory a file server
// serves as https://github.com.
func containerdRelease(ctx context.Context, t *testing.T, root string) string {
	t.Helper()
	var dir string
	for _, script := range []string{"containerd.sh", "crictl.sh"} {
		dir = buildArtifact(ctx, t, root, []string{"CONTAINERD_VERSION=" + containerdVersion, "RUNC_VERSION=" + runcVersion,
			"CNI_VERSION=" + cniVersion, "CRICTL_VERSION=" + crictlVersion}, script)
	}
	return dir
}

// busyboxImage writes a docker-archive (what `docker save` makes) of a
// one-layer image docker.io/e2e/busybox:latest holding Debian's static
// busybox, and returns its path. The machines have no registry to pull from.
func busyboxImage(ctx context.Context, t *testing.T, dir string) string {
	t.Helper()
	busybox := staticBusybox(ctx, t)

	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	add := func(h *tar.Header, body []byte) {
		h.ModTime = time.Unix(0, 0)
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	add(&tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755}, nil)
	add(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(busybox))}, busybox)
	for _, applet := range []string{"sh", "echo", "sleep", "cat", "ls"} {
		add(&tar.Header{Name: "bin/" + applet, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777}, nil)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "busybox-docker-archive.tar")
	dockerArchive(t, path, "docker.io/e2e/busybox:latest", layer.Bytes())
	return path
}

// dockerArchive writes to path a docker-archive (what `docker save` makes)
// of a one-layer amd64 image repoTag whose layer is the tar stream layer.
func dockerArchive(t *testing.T, path, repoTag string, layer []byte) {
	t.Helper()
	layerSum := sha256.Sum256(layer)
	layerName := hex.EncodeToString(layerSum[:]) + ".tar"

	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config":       map[string]any{"Cmd": []string{"/bin/sh"}, "Env": []string{"PATH=/bin"}},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(layerSum[:])}},
	})
	if err != nil {
		t.Fatal(err)
	}
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	manifest, err := json.Marshal([]map[string]any{{
		"Config": configName, "RepoTags": []string{repoTag}, "Layers": []string{layerName},
	}})
	if err != nil {
		t.Fatal(err)
	}

	// Member names without "./": containerd's importer looks them up by
	// the names in manifest.json.
	var archive bytes.Buffer
	aw := tar.NewWriter(&archive)
	for _, m := range []struct {
		name string
		body []byte
	}{{"manifest.json", manifest}, {configName, config}, {layerName, layer}} {
		if err := aw.WriteHeader(&tar.Header{Name: m.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(m.body)), ModTime: time.Unix(0, 0)}); err != nil {
			t.Fatal(err)
		}
		if _, err := aw.Write(m.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := aw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, archive.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// staticBusybox returns the busybox binary of Debian's busybox-static
// package, fetched with apt-get download.
func staticBusybox(ctx context.Context, t *testing.T) []byte {
	t.Helper()
	// apt-get download fetches as the user _apt, into a directory it can
	// reach and write (t.TempDir's are 0700 below a 0700 parent).
	debs, err := os.MkdirTemp("", "kubexm-e2e-busybox-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(debs) })
	if err := os.Chmod(debs, 0o755); err != nil {
		t.Fatal(err)
	}
	if u, err := user.Lookup("_apt"); err == nil {
		uid, err := strconv.Atoi(u.Uid)
		if err != nil {
			t.Fatalf("uid of _apt: %v", err)
		}
		if err := os.Chown(debs, uid, -1); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(ctx, "apt-get", "download", "-q", "busybox-static")
	cmd.Dir = debs
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("apt-get download busybox-static: %v\n%s", err, out)
	}
	matches, err := filepath.Glob(filepath.Join(debs, "busybox-static_*.deb"))
	if err != nil || len(matches) != 1 {
		t.Fatalf("busybox-static package: %v %v", matches, err)
	}
	cmd = exec.CommandContext(ctx, "dpkg-deb", "--fsys-tarfile", matches[0])
	data, err := cmd.Output()
	if err != nil {
		t.Fatalf("dpkg-deb --fsys-tarfile %s: %v", matches[0], err)
	}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != "./bin/busybox" {
			continue
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		f, err := elf.NewFile(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("busybox-static's bin/busybox: %v", err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Fatal("busybox-static's bin/busybox is dynamically linked")
			}
		}
		return body
	}
	t.Fatalf("%s has no ./bin/busybox", matches[0])
	return nil
}

// upload copies a local file to path on host over ssh.
func upload(ctx context.Context, set *testhosts.Set, host, local, path string) error {
	h, err := set.Host(host)
	if err != nil {
		return err
	}
	f, err := os.Open(local)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, "ssh", "-i", set.KeyPath, "-p", strconv.Itoa(h.Port),
		"-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=5",
		"root@"+h.Address, "--", "cat > "+path)
	cmd.Stdin = f
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("upload %s to %s:%s: %w\n%s", local, host, path, err, out)
	}
	return nil
}

// TestContainerdConfigTemplate renders config.toml and the registries'
// hosts.toml files with a private registry, mirrors, insecure and
// plain-HTTP registries, credentials and a certsPath.
func TestContainerdConfigTemplate(t *testing.T) {
	vars := map[string]any{
		"containerd_data_dir": "/data/containerd", "containerd_state_dir": "/run/containerd",
		"containerd_sandbox_image": "reg.local/kx/pause:3.10", "runc_bin": "/usr/local/sbin/runc",
		"cni_bin_dir": "/opt/cni/bin", "containerd_restrict_oom_score_adj": true,
		"containerd_certs_dir":           "/etc/containerd/certs.d",
		"containerd_registry_mirrors":    []any{"mirror.example.com", "http://m2.example.com:5000"},
		"containerd_insecure_registries": []any{"insecure.example.com", "reg.local"},
		"containerd_registry_auths": map[string]any{
			"reg.local":         map[string]any{"username": "u", "password": `p"w`},
			"plain.example.com": map[string]any{"plainHTTP": true},
			"tls.example.com":   map[string]any{"skipTLSVerify": true},
			"ca.example.com":    map[string]any{"username": "ci", "password": "x", "certsPath": "/home/me/certs/ca.example.com"},
		},
		"containerd_extra_config": map[string]any{},
	}
	cfg := containerdConfig(t, renderRoleTemplate(t, "containerd", "config.toml.tmpl", vars))
	images := `plugins."io.containerd.cri.v1.images".`
	runtime := `plugins."io.containerd.cri.v1.runtime".`
	for path, want := range map[string]any{
		"version":                          int64(3),
		"root":                             "/data/containerd",
		"oom_score":                        int64(-999),
		"grpc.address":                     "/run/containerd/containerd.sock",
		runtime + "restrict_oom_score_adj": true,
		runtime + "cni.bin_dirs":           []any{"/opt/cni/bin"},
		runtime + "containerd.runtimes.runc.options": map[string]any{"BinaryName": "/usr/local/sbin/runc", "SystemdCgroup": true},
		images + "pinned_images.sandbox":             "reg.local/kx/pause:3.10",
		images + "registry.config_path":              "/etc/containerd/certs.d",
		// Only credentials stay in config.toml: containerd 2 refuses
		// mirrors and configs.tls beside config_path.
		images + "registry.configs": map[string]any{
			"reg.local":      map[string]any{"auth": map[string]any{"username": "u", "password": `p"w`}},
			"ca.example.com": map[string]any{"auth": map[string]any{"username": "ci", "password": "x"}},
		},
		images + "registry.mirrors": nil,
	} {
		if got := tomlPath(cfg, path); !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", path, got, want)
		}
	}
	// containerd 2 reads version 3 only under the split CRI plugins.
	if tomlPath(cfg, `plugins."io.containerd.cri.v1.images"`) == nil || tomlPath(cfg, `plugins."io.containerd.grpc.v1.cri"`) != nil {
		t.Errorf("config.toml has containerd 1.x settings: %#v", cfg)
	}

	// One hosts.toml per registry that needs one; certsPath is copied as
	// docker's certs.d (no hosts.toml, so containerd reads its *.crt).
	hosts := map[string]map[string]any{}
	for _, h := range roleDefaultList(t, "containerd", "containerd_registry_hosts_json", vars) {
		item := h.(map[string]any)
		with := map[string]any{"item": item}
		for k, v := range vars {
			with[k] = v
		}
		hosts[item["host"].(string)] = containerdConfig(t, renderRoleTemplate(t, "containerd", "hosts.toml.tmpl", with))
	}
	wantHosts := map[string]map[string]any{
		"docker.io": {"server": "https://registry-1.docker.io", "host": map[string]any{
			"https://mirror.example.com": map[string]any{"capabilities": []any{"pull", "resolve"}},
			"http://m2.example.com:5000": map[string]any{"capabilities": []any{"pull", "resolve"}},
		}},
		"plain.example.com":    {"server": "http://plain.example.com"},
		"tls.example.com":      {"server": "https://tls.example.com", "skip_verify": true},
		"insecure.example.com": {"server": "https://insecure.example.com", "skip_verify": true},
		"reg.local":            {"server": "https://reg.local", "skip_verify": true},
	}
	if !reflect.DeepEqual(hosts, wantHosts) {
		t.Errorf("hosts.toml files:\n%#v\nwant\n%#v", hosts, wantHosts)
	}
	certs := roleDefaultList(t, "containerd", "containerd_registry_certs_json", vars)
	if want := []any{map[string]any{"host": "ca.example.com", "dir": "/home/me/certs/ca.example.com"}}; !reflect.DeepEqual(certs, want) {
		t.Errorf("certsPath copies: %#v, want %#v", certs, want)
	}

	// containerd_extra_config is merged: a nested key added and one
	// replaced, the sibling settings kept, a top-level key replaced, a
	// removed one gone.
	vars["containerd_extra_config"] = map[string]any{
		"oom_score": uint64(0),
		"plugins": map[string]any{
			"io.containerd.cri.v1.runtime": map[string]any{
				"containerd": map[string]any{"runtimes": map[string]any{"runc": map[string]any{"options": map[string]any{"SystemdCgroup": false}}}},
				"enable_cdi": true,
			},
			"io.containerd.cri.v1.images": map[string]any{"registry": map[string]any{"config_path": "/etc/containerd/etc-certs.d"}},
		},
		"state": nil,
	}
	cfg = containerdConfig(t, renderRoleTemplate(t, "containerd", "config.toml.tmpl", vars))
	for path, want := range map[string]any{
		"oom_score":                        int64(0),
		"root":                             "/data/containerd",
		"state":                            nil,
		runtime + "enable_cdi":             true,
		runtime + "restrict_oom_score_adj": true,
		runtime + "containerd.runtimes.runc.options": map[string]any{"BinaryName": "/usr/local/sbin/runc", "SystemdCgroup": false},
		images + "registry.config_path":              "/etc/containerd/etc-certs.d",
	} {
		if got := tomlPath(cfg, path); !reflect.DeepEqual(got, want) {
			t.Errorf("with containerd_extra_config: %s = %#v, want %#v", path, got, want)
		}
	}

	// Not a mapping: an error naming the variable.
	vars["containerd_extra_config"] = []any{"oom_score = 0"}
	src, err := os.ReadFile(filepath.Join(moduleRoot(t), "roles", "containerd", "templates", "config.toml.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eval.New().RenderString(string(src), vars); err == nil || !strings.Contains(err.Error(), "containerd_extra_config must be a mapping") {
		t.Errorf("a list as containerd_extra_config: %v", err)
	}
}

// roleDefaultList renders a role default that is a JSON list (the roles'
// *_json variables) with vars.
func roleDefaultList(t *testing.T, role, name string, vars map[string]any) []any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "roles", role, "defaults", "main.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var defaults map[string]any
	if err := yaml.Unmarshal(data, &defaults); err != nil {
		t.Fatal(err)
	}
	src, ok := defaults[name].(string)
	if !ok {
		t.Fatalf("roles/%s: no default %s", role, name)
	}
	out, err := eval.New().RenderString(src, vars)
	if err != nil {
		t.Fatalf("roles/%s %s: %v", role, name, err)
	}
	var list []any
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("roles/%s %s is not a JSON list: %v\n%s", role, name, err, out)
	}
	return list
}

// containerdConfig parses a rendered config.toml.
func containerdConfig(t *testing.T, text string) map[string]any {
	t.Helper()
	var cfg map[string]any
	if err := toml.Unmarshal([]byte(text), &cfg); err != nil {
		t.Fatalf("config.toml is not TOML: %v\n%s", err, text)
	}
	return cfg
}

// tomlPath looks up a dotted TOML key path ("a.\"b.c\".d") in a parsed document.
func tomlPath(doc map[string]any, path string) any {
	var cur any = doc
	for path != "" {
		var key string
		if strings.HasPrefix(path, `"`) {
			end := strings.Index(path[1:], `"`) + 1
			key, path = path[1:end], strings.TrimPrefix(path[end+1:], ".")
		} else if i := strings.IndexByte(path, '.'); i >= 0 {
			key, path = path[:i], path[i+1:]
		} else {
			key, path = path, ""
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[key]
	}
	return cur
}
