//go:build e2e

package e2e

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/engine/eval"
)

// TestRestoreStopsStaticPods runs roles/backup's stop of kubeadm's static
// pods (tasks/restore.yaml) with /bin/sh against stand-ins for ctr and
// crictl whose etcd container runs for the first two listings: on
// containerd it waits through ctr, on docker through crictl at cri-dockerd's
// socket (ctr would list none of dockerd's containers, and the wait would
// end while etcd still holds its data); a listing that fails and a pod that
// outlives the timeout stop the restore.
func TestRestoreStopsStaticPods(t *testing.T) {
	task := roleTask(t, "backup", "restore.yaml", "restore - stop the static pods (their manifests aside)")
	script := task["shell"].(string)
	env := task["environment"].(map[string]any)
	ev := eval.New()
	for _, c := range []struct {
		name, runtime string
		broken        bool // the runtime's client fails
		timeout       string
		want          string // in the output; "" for none
		fails         bool
	}{
		{name: "containerd", runtime: "containerd", timeout: "30", want: "stopped kube-scheduler kube-controller-manager kube-apiserver etcd"},
		{name: "docker", runtime: "docker", timeout: "30", want: "stopped kube-scheduler kube-controller-manager kube-apiserver etcd"},
		{name: "docker, crictl failing", runtime: "docker", broken: true, timeout: "30", want: "cannot list the running containers", fails: true},
		{name: "containerd, ctr failing", runtime: "containerd", broken: true, timeout: "30", want: "cannot list the running containers", fails: true},
		{name: "etcd outlives the timeout", runtime: "docker", timeout: "0", want: "still running 0 s after their manifests went: etcd", fails: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			manifests, aside, bin := filepath.Join(dir, "manifests"), filepath.Join(dir, "aside"), filepath.Join(dir, "bin")
			for _, d := range []string{manifests, bin} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, p := range []string{"kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"} {
				if err := os.WriteFile(filepath.Join(manifests, p+".yaml"), []byte("kind: Pod\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			// Each stand-in logs its arguments and answers for etcd's
			// container: running in the first two listings, then gone.
			count := `n=$(cat "$0.n" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "$0.n"; echo "$*" >> "$0.log"` + "\n"
			if c.broken {
				count += "exit 1\n"
			}
			crictl := "#!/bin/sh\n" + count + `case "$*" in *"--name ^etcd$"*) [ "$n" -gt 8 ] || echo 4f2a;; esac` + "\n"
			ctr := "#!/bin/sh\n" + count + `case "$*" in
*"containers ls"*etcd*) echo c-etcd ;;
*"tasks ls"*) [ "$(cat "$0.tasks" 2>/dev/null)" = xx ] && status=STOPPED || status=RUNNING; echo "x$(cat "$0.tasks" 2>/dev/null)" > "$0.tasks"
  echo "TASK PID STATUS"; echo "c-etcd 42 $status" ;;
esac
`
			for name, text := range map[string]string{"crictl": crictl, "ctr": ctr} {
				if err := os.WriteFile(filepath.Join(bin, name), []byte(text), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			v := map[string]any{
				"restore_control_plane_units": []any{"kube-scheduler", "kube-controller-manager", "kube-apiserver"},
				"etcd_type":                   "kubeadm",
				"restore_manifests_dir":       manifests,
				"restore_manifests_aside":     aside,
				"restore_ctr_bin":             filepath.Join(bin, "ctr"),
				"restore_crictl_bin":          filepath.Join(bin, "crictl"),
				"restore_static_pods_timeout": c.timeout,
				"container_runtime_type":      c.runtime,
				"cri_endpoint":                map[string]string{"docker": "unix:///run/cri-dockerd.sock", "containerd": "unix:///run/containerd/containerd.sock"}[c.runtime],
			}
			cmd := exec.Command("/bin/sh", "-c", script)
			cmd.Env = []string{"PATH=/usr/bin:/bin"}
			for k, expr := range env {
				s, err := ev.RenderString(expr.(string), v)
				if err != nil {
					t.Fatalf("environment %s: %v", k, err)
				}
				cmd.Env = append(cmd.Env, k+"="+s)
			}
			out, err := cmd.CombinedOutput()
			if (err != nil) != c.fails || !strings.Contains(string(out), c.want) {
				t.Fatalf("err %v, want failure %v; output:\n%s\nwant %q", err, c.fails, out, c.want)
			}
			crictlLog, _ := os.ReadFile(filepath.Join(bin, "crictl.log"))
			ctrLog, _ := os.ReadFile(filepath.Join(bin, "ctr.log"))
			if c.runtime == "docker" {
				if len(ctrLog) > 0 || !strings.Contains(string(crictlLog), "--runtime-endpoint unix:///run/cri-dockerd.sock ps --state running --name ^kube-scheduler$ -q") {
					t.Errorf("on docker: want crictl through cri-dockerd and no ctr; crictl:\n%sctr:\n%s", crictlLog, ctrLog)
				}
			} else if len(crictlLog) > 0 || len(ctrLog) == 0 {
				t.Errorf("on containerd: want ctr and no crictl; crictl:\n%sctr:\n%s", crictlLog, ctrLog)
			}
			if !c.fails && strings.Count(string(crictlLog)+string(ctrLog), "etcd") < 3 {
				t.Errorf("the wait did not list etcd until it stopped; crictl:\n%sctr:\n%s", crictlLog, ctrLog)
			}
			if left, _ := filepath.Glob(filepath.Join(manifests, "*.yaml")); len(left) > 0 {
				t.Errorf("manifests left in place: %v", left)
			}
		})
	}
}

// TestStaticPodsRestart runs roles/kubernetes/static-pods' restart
// (kubeadm's certs-renew, rotate-ca and the autoRenewCerts timer) with
// /bin/sh against stand-ins for ctr, crictl and curl: each manifest gets a
// new kubexm.io/restarted-at annotation and the restart waits for a
// container other than the one running before. Where cri-dockerd's socket
// is (a docker node: the timer has no cluster.yaml to say so) the
// containers are listed with crictl through it and ctr is not asked; on
// containerd ctr lists them.
func TestStaticPodsRestart(t *testing.T) {
	task := roleTask(t, "kubernetes/static-pods", "restart.yaml", "static pods - restart")
	script := task["shell"].(string)
	env := task["environment"].(map[string]any)
	ev := eval.New()
	for _, runtime := range []string{"containerd", "docker"} {
		t.Run(runtime, func(t *testing.T) {
			// A short directory: a unix socket's path has a length limit.
			dir, err := os.MkdirTemp("", "sp")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			manifests, bin := filepath.Join(dir, "m"), filepath.Join(dir, "b")
			for _, d := range []string{manifests, bin} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, p := range []string{"kube-apiserver", "kube-scheduler"} {
				if err := os.WriteFile(filepath.Join(manifests, p+".yaml"), []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: "+p+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			sock := filepath.Join(dir, "cri-dockerd.sock")
			if runtime == "docker" {
				l, err := net.Listen("unix", sock)
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
			}
			// A pod's container is old-<name> until its manifest carries the
			// annotation, new-<name> afterwards.
			current := `m=` + manifests + `/$1.yaml; grep -q restarted-at "$m" && echo "new-$1" || echo "old-$1"`
			crictl := "#!/bin/sh\necho \"$*\" >> \"$0.log\"\nname=$(echo \"$*\" | sed -n 's/.*--name \\^\\([a-z-]*\\)\\$.*/\\1/p')\nset -- \"$name\"\n" + current + "\n"
			ctr := "#!/bin/sh\necho \"$*\" >> \"$0.log\"\ncase \"$*\" in\n" +
				`*"containers ls"*) name=$(echo "$*" | sed -n 's/.*==\([a-z-]*\)$/\1/p'); set -- "$name"; ` + current + " ;;\n" +
				`*"tasks ls"*) for p in kube-apiserver kube-scheduler; do set -- $p; echo "$(` + current + `) 1 RUNNING"; done ;;` + "\nesac\n"
			for name, text := range map[string]string{"crictl": crictl, "ctr": ctr, "curl": "#!/bin/sh\nexit 0\n"} {
				if err := os.WriteFile(filepath.Join(bin, name), []byte(text), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			v := map[string]any{
				"static_pods_ctr_bin":            filepath.Join(bin, "ctr"),
				"static_pods_crictl_bin":         filepath.Join(bin, "crictl"),
				"static_pods_cri_dockerd_socket": sock,
				"static_pods_manifest_dir":       manifests,
				"static_pods_restart_timeout":    10,
				"static_pods_restart": []any{
					map[string]any{"name": "kube-apiserver", "url": "https://127.0.0.1:6443/readyz"},
					map[string]any{"name": "kube-scheduler", "url": "https://127.0.0.1:10259/healthz", "with_previous": true},
				},
			}
			cmd := exec.Command("/bin/sh", "-c", script)
			cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin"}
			for k, expr := range env {
				s, err := ev.RenderString(expr.(string), v)
				if err != nil {
					t.Fatalf("environment %s: %v", k, err)
				}
				cmd.Env = append(cmd.Env, k+"="+s)
			}
			out, err := cmd.CombinedOutput()
			if err != nil || string(out) != "restarted kube-apiserver\nrestarted kube-scheduler\n" {
				t.Fatalf("%v\n%s", err, out)
			}
			for _, p := range []string{"kube-apiserver", "kube-scheduler"} {
				if m, _ := os.ReadFile(filepath.Join(manifests, p+".yaml")); !strings.Contains(string(m), "  annotations:\n    kubexm.io/restarted-at: \"") {
					t.Errorf("%s's manifest:\n%s", p, m)
				}
			}
			crictlLog, _ := os.ReadFile(filepath.Join(bin, "crictl.log"))
			ctrLog, _ := os.ReadFile(filepath.Join(bin, "ctr.log"))
			if runtime == "docker" {
				if len(ctrLog) > 0 || !strings.Contains(string(crictlLog), "--runtime-endpoint unix://"+sock+" ps --state running --name ^kube-scheduler$ -q") {
					t.Errorf("on docker: want crictl through cri-dockerd and no ctr; crictl:\n%sctr:\n%s", crictlLog, ctrLog)
				}
			} else if len(crictlLog) > 0 || !strings.Contains(string(ctrLog), `containers ls -q labels."io.kubernetes.container.name"==kube-scheduler`) {
				t.Errorf("on containerd: want ctr and no crictl; crictl:\n%sctr:\n%s", crictlLog, ctrLog)
			}
		})
	}
}
