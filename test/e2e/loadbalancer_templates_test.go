//go:build e2e

package e2e

// The fast part of roles/loadbalancer, without machines: the defaults pick
// the proxy of each mode, and the haproxy, nginx and keepalived templates
// render what the role intends.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm/engine/eval"
	"github.com/mensylisir/kubexm/schema"
	"github.com/mensylisir/kubexm/test/testhosts"
)

// lbVars are the loadbalancer role's variables on host for the mode set by
// adjust, over the small cluster of kubeVars (n1 master, n2 and n3 workers)
// with two more masters (n4, n5) and two loadbalancer hosts (lb1, lb2).
func lbVars(t *testing.T, host string, adjust func(cpe map[string]any)) map[string]any {
	t.Helper()
	v := kubeVars("n2", func(s map[string]any) {
		if adjust != nil {
			adjust(s["controlPlaneEndpoint"].(map[string]any))
		}
	})
	hv := v["hostvars"].(map[string]any)
	for n, a := range map[string]string{"n4": "10.0.0.4", "n5": "10.0.0.5", "lb1": "10.0.0.21", "lb2": "10.0.0.22"} {
		hv[n] = map[string]any{"internal_address": a, "address": a, "arch": "amd64", "labels": map[string]any{}}
	}
	g := v["groups"].(map[string]any)
	g["master"] = []any{"n1", "n4", "n5"}
	g["loadbalancer"] = []any{"lb1", "lb2"}
	v["inventory_hostname"] = host
	for k, val := range hv[host].(map[string]any) {
		v[k] = val
	}
	// images_refs' entry (the image list needs more of cluster.yaml than
	// kubeVars has).
	v["kube_vip_image"] = "ghcr.io/kube-vip/kube-vip:v1.2.3"
	return withDefaults(t, "loadbalancer", v)
}

func TestLoadBalancerTemplateDefaults(t *testing.T) {
	for _, tc := range []struct {
		name, host                     string
		adjust                         func(map[string]any)
		proxy, bind, unit, other, pkgs string
	}{
		{"internal haproxy", "n2", func(c map[string]any) { c["internalLoadbalancer"] = "haproxy" },
			"haproxy", "127.0.0.1:6443", "kubexm-haproxy", "kubexm-nginx", "haproxy"},
		{"internal nginx", "n2", func(c map[string]any) { c["internalLoadbalancer"] = "nginx" },
			"nginx", "127.0.0.1:6443", "kubexm-nginx", "kubexm-haproxy", "nginx libnginx-mod-stream"},
		{"external kubexm", "lb1", func(c map[string]any) {
			c["internalLoadbalancer"], c["externalLoadBalancer"], c["lb_address"], c["port"] = "", "kubexm", "10.0.0.100", 8443
		}, "haproxy", ":8443", "kubexm-haproxy", "kubexm-nginx", "keepalived haproxy"},
		{"external kubexm with nginx", "lb1", func(c map[string]any) {
			c["internalLoadbalancer"], c["externalLoadBalancer"], c["lb_address"], c["port"] = "nginx", "kubexm", "10.0.0.100", 8443
		}, "nginx", ":8443", "kubexm-nginx", "kubexm-haproxy", "keepalived nginx libnginx-mod-stream"},
	} {
		v := lbVars(t, tc.host, tc.adjust)
		got := []string{v["lb_proxy"].(string), v["lb_bind"].(string), v["lb_unit"].(string), v["lb_other_unit"].(string)}
		want := []string{tc.proxy, tc.bind, tc.unit, tc.other}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: proxy, bind, unit, other unit %v, want %v", tc.name, got, want)
		}
		var pkgs []string
		for _, p := range v["kube_control_plane_lb_packages"].([]any) {
			pkgs = append(pkgs, p.(string))
		}
		if strings.Join(pkgs, " ") != tc.pkgs {
			t.Errorf("%s: packages %v, want %s", tc.name, pkgs, tc.pkgs)
		}
	}
	// The first loadbalancer host has the highest priority.
	for host, want := range map[string]string{"lb1": "150", "lb2": "149"} {
		v := lbVars(t, host, func(c map[string]any) { c["externalLoadBalancer"], c["lb_address"] = "kubexm", "10.0.0.100" })
		if got := v["lb_vrrp_priority"]; got != want {
			t.Errorf("%s: priority %v, want %s", host, got, want)
		}
	}
}

func TestLoadBalancerHAProxyTemplate(t *testing.T) {
	v := lbVars(t, "n2", func(c map[string]any) { c["internalLoadbalancer"] = "haproxy" })
	cfg := renderRoleTemplate(t, "loadbalancer", "haproxy.cfg.tmpl", v)
	for _, want := range []string{
		"bind 127.0.0.1:6443\n", "option httpchk GET /readyz", "on-marked-down shutdown-sessions",
		"server n1 10.0.0.1:6443\n", "server n4 10.0.0.4:6443\n", "server n5 10.0.0.5:6443\n",
		"option redispatch 1\n", "option allbackups\n", "server n5-unchecked 10.0.0.5:6443 backup no-check\n",
		"use_backend kube-apiserver-listening if { nbsrv(kube-apiserver) eq 0 }\n",
		// The admin socket roles/loadbalancer tasks/backend.yaml drains a master through.
		"bind unix@/run/kubexm-haproxy.sock mode 600\n", "stats admin if TRUE\n",
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("haproxy.cfg lacks %q:\n%s", want, cfg)
		}
	}
	checkWithBinary(t, "haproxy", cfg, "haproxy.cfg", []string{"-c", "-f"})
}

func TestLoadBalancerNginxTemplates(t *testing.T) {
	v := lbVars(t, "n2", func(c map[string]any) { c["internalLoadbalancer"] = "nginx" })
	cfg := renderRoleTemplate(t, "loadbalancer", "nginx.conf.tmpl", v)
	for _, want := range []string{
		"load_module /usr/lib/nginx/modules/ngx_stream_module.so;\n",
		"worker_processes 1;\n", "worker_connections 8000;\n", "pid /run/kubexm-nginx.pid;\n",
		"listen 127.0.0.1:6443;\n", "proxy_connect_timeout 2s;\n", "proxy_timeout 10m;\n", "proxy_next_upstream on;\n",
		"server 10.0.0.1:6443 max_fails=2 fail_timeout=10s;\n",
		"server 10.0.0.4:6443 max_fails=2 fail_timeout=10s;\n",
		"server 10.0.0.5:6443 max_fails=2 fail_timeout=10s;\n",
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("nginx.conf lacks %q:\n%s", want, cfg)
		}
	}
	checkWithBinary(t, "nginx", cfg, "nginx.conf", []string{"-t", "-q", "-e", "stderr", "-c"})
	// On the loadbalancer hosts (externalLoadBalancer kubexm) nginx listens
	// on every address, where keepalived puts the VIP.
	ext := lbVars(t, "lb1", func(c map[string]any) {
		c["internalLoadbalancer"], c["externalLoadBalancer"], c["lb_address"] = "nginx", "kubexm", "10.0.0.100"
	})
	extCfg := renderRoleTemplate(t, "loadbalancer", "nginx.conf.tmpl", ext)
	if !strings.Contains(extCfg, "listen 6443;\n") {
		t.Errorf("nginx.conf on a loadbalancer host does not listen on every address's 6443:\n%s", extCfg)
	}
	checkWithBinary(t, "nginx", extCfg, "nginx.conf", []string{"-t", "-q", "-e", "stderr", "-c"})
	check := renderRoleTemplate(t, "loadbalancer", "keepalived-check.sh.tmpl", ext)
	if !strings.Contains(check, "kubexm-nginx.service") {
		t.Errorf("keepalived's check on a loadbalancer host with nginx does not check kubexm-nginx:\n%s", check)
	}
	// The kubeadm HA suite reads the backends back with nginxServers.
	if got, want := nginxServers(cfg, "kube_apiserver"), []string{
		"server 10.0.0.1:6443 max_fails=2 fail_timeout=10s",
		"server 10.0.0.4:6443 max_fails=2 fail_timeout=10s",
		"server 10.0.0.5:6443 max_fails=2 fail_timeout=10s",
	}; !slices.Equal(got, want) {
		t.Errorf("nginxServers: %q, want %q", got, want)
	}
	if strings.Contains(cfg, "http {") {
		t.Errorf("nginx.conf has an http block: only the stream module is loaded\n%s", cfg)
	}
	unit := renderRoleTemplate(t, "loadbalancer", "kubexm-nginx.service.tmpl", v)
	for _, want := range []string{
		`Environment="CONFIG=/etc/kubexm/nginx/nginx.conf"`,
		"ExecStartPre=/usr/sbin/nginx -t -q -e stderr -c $CONFIG\n",
		`ExecStart=/usr/sbin/nginx -e stderr -c $CONFIG -g "daemon off;"` + "\n",
		"ExecReload=/bin/kill -HUP $MAINPID\n", "Restart=always\n",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("kubexm-nginx.service lacks %q:\n%s", want, unit)
		}
	}
}

func TestLoadBalancerKeepalivedTemplates(t *testing.T) {
	v := lbVars(t, "lb2", func(c map[string]any) {
		c["externalLoadBalancer"], c["lb_address"] = "kubexm", "10.0.0.100"
	})
	// Set by the role from the host's interfaces.
	v["lb_vrrp_iface"], v["lb_vrrp_src"] = "eth0", "10.0.0.22"
	cfg := renderRoleTemplate(t, "loadbalancer", "keepalived.conf.tmpl", v)
	for _, want := range []string{
		"router_id lb2\n", "enable_script_security\n",
		`script "/etc/kubexm/keepalived/check.sh"` + "\n", "fall 2\n", "rise 2\n",
		"state BACKUP\n", "interface eth0\n", "virtual_router_id 51\n", "priority 149\n", "nopreempt\n",
		// VRRPv3 adverts every 0.5 s: a backup takes over after about 1.7 s.
		"version 3\n", "advert_int 0.5\n",
		"unicast_src_ip 10.0.0.22\n", "unicast_peer {\n        10.0.0.21\n    }\n",
		"10.0.0.100/32 dev eth0\n", "kubexm_lb_check\n",
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("keepalived.conf lacks %q:\n%s", want, cfg)
		}
	}
	if strings.Contains(cfg, "10.0.0.22\n    }") {
		t.Errorf("keepalived.conf names the host itself as its peer:\n%s", cfg)
	}
	v["lb_vrrp_nopreempt"] = false
	if cfg := renderRoleTemplate(t, "loadbalancer", "keepalived.conf.tmpl", v); strings.Contains(cfg, "\n    nopreempt\n") {
		t.Errorf("lb_vrrp_nopreempt false still writes nopreempt:\n%s", cfg)
	}

	check := renderRoleTemplate(t, "loadbalancer", "keepalived-check.sh.tmpl", v)
	for _, want := range []string{
		"systemctl is-active --quiet kubexm-haproxy.service || exit 1\n",
		"exec timeout 2 bash -c 'exec 3<>/dev/tcp/127.0.0.1/6443'\n",
	} {
		if !strings.Contains(check, want) {
			t.Errorf("check.sh lacks %q:\n%s", want, check)
		}
	}
	if out, err := exec.Command("sh", "-n", "-c", check).CombinedOutput(); err != nil {
		t.Errorf("check.sh is not valid sh: %v\n%s", err, out)
	}
	unit := renderRoleTemplate(t, "loadbalancer", "kubexm-keepalived.service.tmpl", v)
	for _, want := range []string{
		"After=network-online.target kubexm-haproxy.service\n",
		"ExecStart=/usr/sbin/keepalived --dont-fork --log-console --vrrp --use-file $CONFIG --pid /run/kubexm-keepalived.pid --vrrp_pid /run/kubexm-keepalived-vrrp.pid\n",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("kubexm-keepalived.service lacks %q:\n%s", want, unit)
		}
	}
	checkWithBinary(t, "keepalived", cfg, "keepalived.conf", []string{"--config-test", "--use-file"})

	// The haproxy of the loadbalancer hosts listens on every address (the
	// VIP comes and goes) on the endpoint's port.
	if cfg := renderRoleTemplate(t, "loadbalancer", "haproxy.cfg.tmpl", v); !strings.Contains(cfg, "bind :6443\n") {
		t.Errorf("haproxy.cfg on a loadbalancer host:\n%s", cfg)
	}
}

// checkWithBinary runs the program's own configuration check on a rendered
// file when the program is installed on this machine.
func checkWithBinary(t *testing.T, prog, content, name string, args []string) {
	t.Helper()
	bin, err := exec.LookPath(prog)
	if err != nil {
		t.Logf("%s is not installed here: its own check of %s is skipped", prog, name)
		return
	}
	f := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, append(args, f)...).CombinedOutput(); err != nil {
		t.Errorf("%s rejects %s: %v\n%s\n%s", prog, name, err, out, content)
	}
}

// The VIP suite's cluster.yaml has the loadbalancer hosts, the VIP and the
// mode where the schema reads them (decoded: whether the matrix installs
// the mode is roles/support.yaml's).
func TestVIPClusterYAML(t *testing.T) {
	set := &testhosts.Set{KeyPath: "/k", Gateway: "10.77.9.1"}
	for i := 1; i <= 6; i++ {
		set.Hosts = append(set.Hosts, testhosts.Host{Name: fmt.Sprintf("n%d", i), Address: fmt.Sprintf("10.77.9.%d", 10+i), Port: 22})
	}
	c, _, err := schema.Decode("cluster.yaml", []byte(vipClusterYAML("e2e-vip", set, "10.77.9.250", "haproxy")))
	if err != nil {
		t.Fatal(err)
	}
	rg, cpe := c.Spec.RoleGroups, c.Spec.ControlPlaneEndpoint
	if got := strings.TrimSpace(fmt.Sprintln(rg.Master, rg.Etcd, rg.Worker, rg.Loadbalancer, cpe.ExternalLoadBalancer, cpe.InternalLoadbalancer, cpe.LBAddress)); got != "[n1 n2 n3] [n1 n2 n3] [n4] [n5 n6] kubexm  10.77.9.250" {
		t.Errorf("masters, etcd, workers, loadbalancer hosts, external and internal mode, VIP: %q", got)
	}
}

// TestLoadBalancerKubeVIPTemplate: kube-vip's static pod announces
// lb_address by ARP on the interface the role found, elects through the
// Lease, reaches its own master's API server, and has the Service load
// balancer off; the masters' domain resolves to themselves, the other
// nodes' to the VIP; the pod is valid YAML of a Pod.
func TestLoadBalancerKubeVIPTemplate(t *testing.T) {
	kubeVIP := func(c map[string]any) { c["internalLoadbalancer"], c["lb_address"] = "kube-vip", "10.0.0.100" }
	v := lbVars(t, "n4", kubeVIP)
	v["lb_kube_vip_iface"] = "eth0" // set by the role from the host's interfaces
	pod := renderRoleTemplate(t, "loadbalancer", "kube-vip.yaml.tmpl", v)
	var m struct {
		Kind string
		Spec struct {
			HostNetwork bool `yaml:"hostNetwork"`
			HostAliases []struct {
				IP        string
				Hostnames []string
			} `yaml:"hostAliases"`
			Containers []struct {
				Image string
				Args  []string
				Env   []struct{ Name, Value string }
			}
			Volumes []struct {
				HostPath struct{ Path, Type string } `yaml:"hostPath"`
			}
		}
	}
	if err := yaml.Unmarshal([]byte(pod), &m); err != nil {
		t.Fatalf("kube-vip.yaml: %v\n%s", err, pod)
	}
	if m.Kind != "Pod" || !m.Spec.HostNetwork || len(m.Spec.Containers) != 1 || len(m.Spec.HostAliases) != 1 ||
		m.Spec.HostAliases[0].IP != "127.0.0.1" || len(m.Spec.Volumes) != 1 {
		t.Fatalf("kube-vip.yaml is not one host-network container with the kubernetes alias:\n%s", pod)
	}
	c := m.Spec.Containers[0]
	if c.Image != "ghcr.io/kube-vip/kube-vip:v1.2.3" || strings.Join(c.Args, " ") != "manager" {
		t.Errorf("image %q args %v", c.Image, c.Args)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	for k, want := range map[string]string{
		"address": "10.0.0.100", "port": "6443", "vip_interface": "eth0", "vip_arp": "true", "cp_enable": "true",
		"svc_enable": "false", "vip_leaderelection": "true", "vip_leasename": "plndr-cp-lock", "vip_leaseduration": "3",
		"vip_renewdeadline": "2", "vip_retryperiod": "1", "kubernetes_addr": "kubernetes:6443",
		"k8s_config_file": "/etc/kube-vip/kubeconfig",
	} {
		if env[k] != want {
			t.Errorf("env %s = %q, want %q", k, env[k], want)
		}
	}
	if got := m.Spec.Volumes[0].HostPath; got.Path != "/etc/kubernetes/admin.kubeconfig" || got.Type != "File" {
		t.Errorf("the kubeconfig volume %+v, want binary mode's admin.kubeconfig", got)
	}
	// A master added or removed must not restart every kube-vip (the VIP
	// would blink): the manifest is the same whatever the masters are.
	v["groups"].(map[string]any)["master"] = []any{"n1", "n4"}
	if again := renderRoleTemplate(t, "loadbalancer", "kube-vip.yaml.tmpl", v); again != pod {
		t.Errorf("kube-vip.yaml changes with the set of masters:\n%s\n---\n%s", pod, again)
	}
	if got := v["kube_control_plane_host_address"]; got != "10.0.0.4" {
		t.Errorf("master n4's domain resolves to %v, want its own address", got)
	}
	if got := lbVars(t, "n2", kubeVIP)["kube_control_plane_host_address"]; got != "10.0.0.100" {
		t.Errorf("worker n2's domain resolves to %v, want the VIP", got)
	}
	if got := v["lb_vip"]; got != "10.0.0.100" {
		t.Errorf("lb_vip %v", got)
	}
}

func TestKubeVIPClusterYAML(t *testing.T) {
	set := &testhosts.Set{KeyPath: "/k", Gateway: "10.77.9.1"}
	for i := 1; i <= 4; i++ {
		set.Hosts = append(set.Hosts, testhosts.Host{Name: fmt.Sprintf("n%d", i), Address: fmt.Sprintf("10.77.9.%d", 10+i), Port: 22})
	}
	c, _, err := schema.Decode("cluster.yaml", []byte(kubeVIPClusterYAML(t, "e2e-kube-vip", set, "10.77.9.250")))
	if err != nil {
		t.Fatal(err)
	}
	rg, cpe := c.Spec.RoleGroups, c.Spec.ControlPlaneEndpoint
	if got := strings.TrimSpace(fmt.Sprintln(rg.Master, rg.Etcd, rg.Worker, cpe.InternalLoadbalancer, cpe.LBAddress, c.Spec.Kubernetes.Type)); got != "[n1 n2 n3] [n1 n2 n3] [n4] kube-vip 10.77.9.250 kubexm" {
		t.Errorf("masters, etcd, workers, mode, VIP, kubernetes.type: %q", got)
	}
	t.Setenv("KUBEXM_E2E_ETCD_TIMING", "100/1000")
	if c, _, err = schema.Decode("cluster.yaml", []byte(kubeVIPClusterYAML(t, "e2e-kube-vip", set, "10.77.9.250"))); err != nil {
		t.Fatal(err)
	}
	if e := c.Spec.Etcd; e.HeartbeatInterval != 100 || e.ElectionTimeout != 1000 {
		t.Errorf("KUBEXM_E2E_ETCD_TIMING=100/1000: heartbeatInterval %d, electionTimeout %d", e.HeartbeatInterval, e.ElectionTimeout)
	}
}

// The role refuses an advert interval VRRPv2 cannot carry (whole seconds
// only) before it writes keepalived.conf; VRRPv3 takes centiseconds.
func TestLoadBalancerTemplateVRRPAdvertFitsVersion(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "roles", "loadbalancer", "tasks", "main.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tasks []map[string]any
	if err := yaml.Unmarshal(data, &tasks); err != nil {
		t.Fatal(err)
	}
	var that string
	for _, task := range tasks {
		block, _ := task["block"].([]any)
		for _, b := range block {
			if m, _ := b.(map[string]any); m["name"] == "Load balancer - VRRP's advert interval fits its version" {
				a, _ := m["assert"].(map[string]any)
				if l, _ := a["that"].([]any); len(l) == 1 {
					that, _ = l[0].(string)
				}
			}
		}
	}
	if that == "" {
		t.Fatal("no single-condition assert of the advert interval in roles/loadbalancer/tasks/main.yaml")
	}
	e := eval.New()
	for _, c := range []struct {
		version, advert any
		ok              bool
	}{
		{3, 0.5, true}, {3, 1, true}, {"3", "0.25", true}, {2, 1, true}, {2, "2", true},
		{2, 0.5, false}, {"2", "1.5", false},
	} {
		got, err := e.EvalBool(that, map[string]any{"lb_vrrp_version": c.version, "lb_vrrp_advert_int": c.advert})
		if err != nil || got != c.ok {
			t.Errorf("version %v, advert_int %v: %v (%v), want %v", c.version, c.advert, got, err, c.ok)
		}
	}
}

// TestKubeVIPBackendScript runs backend.yaml's kube-vip step here: a master
// not holding the VIP is left alone on "out" (no manifest moved); "in" puts
// a parked manifest back, or drops the parked copy when the role has written
// the manifest again since, and says nothing when nothing is parked. The
// holder's step-down itself (the kubelet stopping kube-vip) needs a master:
// make e2e-upgrade-ha-kube-vip.
func TestKubeVIPBackendScript(t *testing.T) {
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("the script asks ip for the host's addresses; iproute2 is not installed here")
	}
	script, _ := roleTask(t, "loadbalancer", "backend.yaml", `Load balancer - {{ .lb_backend_masters | join ", " }} {{ if eq .lb_backend_state "out" }}out of{{ else }}back into{{ end }} kube-vip's election`)["shell"].(string)
	if script == "" {
		t.Fatal("backend.yaml's kube-vip task has no shell script")
	}
	dir := t.TempDir()
	manifest, parked := filepath.Join(dir, "manifests", "kube-vip.yaml"), filepath.Join(dir, "kube-vip.parked.yaml")
	if err := os.MkdirAll(filepath.Dir(manifest), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(state, want string) {
		t.Helper()
		c := exec.Command("sh", "-c", script)
		// 192.0.2.250 (TEST-NET-1) is on no interface here.
		c.Env = append(os.Environ(), "VIP=192.0.2.250", "MANIFEST="+manifest, "PARKED="+parked, "STATE="+state)
		got, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", state, err, got)
		}
		if strings.TrimSpace(string(got)) != want {
			t.Errorf("%s: said %q, want %q", state, got, want)
		}
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	write := func(p, text string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	write(manifest, "pod\n")
	run("out", "")
	if !exists(manifest) || exists(parked) {
		t.Errorf("out on a master not holding the VIP moved its manifest")
	}
	run("in", "")

	os.Remove(manifest)
	write(parked, "parked pod\n")
	run("in", "a candidate again")
	if got, _ := os.ReadFile(manifest); string(got) != "parked pod\n" || exists(parked) {
		t.Errorf("in did not put the parked manifest back: manifest %q, parked left %v", got, exists(parked))
	}

	write(parked, "old pod\n")
	run("in", "a candidate again")
	if got, _ := os.ReadFile(manifest); string(got) != "parked pod\n" || exists(parked) {
		t.Errorf("in with a manifest written since: manifest %q (want it kept), parked left %v", got, exists(parked))
	}
}

// TestKubeVIPEtcdLeaderAwayScript runs the etcd leader check of
// tasks/kube-vip.yaml against a stand-in etcdctl answering as etcd 3.7's
// does (its table, member ids in hex) and a stand-in ip: while this master
// holds the VIP and its member leads, leadership goes to the first voting
// member that answers (not a learner); a master without the VIP, or one
// whose member does not lead, moves nothing.
func TestKubeVIPEtcdLeaderAwayScript(t *testing.T) {
	dir := t.TempDir()
	kubeVIP := func(c map[string]any) { c["internalLoadbalancer"], c["lb_address"] = "kube-vip", "10.0.0.100" }
	vars := func(etcdType string) map[string]any {
		v := lbVars(t, "n4", kubeVIP)
		v["etcd_type"] = etcdType
		return withDefaults(t, "etcd", v)
	}
	for etcdType, wants := range map[string][]string{
		"kubexm":  {"--endpoints=https://127.0.0.1:2379", "--cacert=/etc/kubexm/etcd/ssl/ca.pem", "--cert=/etc/kubexm/etcd/ssl/admin-n4.pem", "--key=/etc/kubexm/etcd/ssl/admin-n4-key.pem", "/usr/local/bin/etcdctl"},
		"kubeadm": {"--endpoints=https://127.0.0.1:2379", "--cacert=/etc/kubernetes/pki/etcd/ca.crt", "--cert=/etc/kubernetes/pki/etcd/healthcheck-client.crt", "/usr/local/lib/kubexm/etcd/etcdctl"},
	} {
		script := renderRoleTemplate(t, "loadbalancer", "etcd-leader-away.sh.tmpl", vars(etcdType))
		for _, want := range wants {
			if !strings.Contains(script, want) {
				t.Errorf("etcd.type %s: the check does not reach the member with %s:\n%s", etcdType, want, script)
			}
		}
	}
	v := vars("kubexm")
	v["etcd_client_bin_dir"] = dir
	v["lb_kube_vip_etcd_leader_check"] = 0.05
	script := renderRoleTemplate(t, "loadbalancer", "etcd-leader-away.sh.tmpl", v)

	const head = "┌──┐\n│        ENDPOINT        │        ID        │ VERSION │ STORAGE VERSION │ DB SIZE │ IN USE │ PERCENTAGE NOT IN USE │ QUOTA  │ IS LEADER │ IS LEARNER │ RAFT TERM │ RAFT INDEX │ RAFT APPLIED INDEX │ ERRORS │ DOWNGRADE TARGET VERSION │ DOWNGRADE ENABLED │\n├──┤\n"
	row := func(ep, id, leader, learner string) string {
		return "│ " + ep + " │ " + id + " │   3.7.3 │           3.7.0 │   20 kB │  16 kB │                   20% │ 2.1 GB │      " + leader + " │      " + learner + " │         2 │          4 │                  4 │        │                          │             false │\n"
	}
	self := head + row("https://127.0.0.1:2379", "e0a123b3b0169fcd", "true", "false") + "└──┘\n"
	cluster := head + row("https://10.0.0.4:2379", "e0a123b3b0169fcd", "true", "false") +
		row("https://10.0.0.6:2379", "5a0c2c2d1b7e9f31", "false", "true") +
		row("https://10.0.0.5:2379", "8211f1d0f64f3269", "false", "false") + "└──┘\n"
	write := func(name, text string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("self.txt", self, 0o644)
	write("cluster.txt", cluster, 0o644)
	// The stand-in etcdctl logs each move-leader and answers the status
	// of this member, or of every member with --cluster.
	write("etcdctl", `#!/bin/sh
d=$(dirname "$0")
for a; do
  case $a in
  move-leader) echo "$*" >>"$d/moves"; exit 0 ;;
  --cluster) cat "$d/cluster.txt"; exit 0 ;;
  esac
done
cat "$d/self.txt"
`, 0o755)
	// The stand-in ip shows the VIP while the file "holds" exists.
	write("ip", `#!/bin/sh
d=$(dirname "$0")
echo "1: lo    inet 127.0.0.1/8 scope host lo"
[ -e "$d/holds" ] && echo "2: eth0    inet 10.0.0.100/32 scope global eth0"
echo "2: eth0    inet 10.0.0.4/24 brd 10.0.0.255 scope global eth0"
`, 0o755)
	moves := func() string { b, _ := os.ReadFile(filepath.Join(dir, "moves")); return string(b) }

	c := exec.Command("sh", "-c", script)
	c.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
	var out strings.Builder
	c.Stdout, c.Stderr = &out, &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Process.Kill(); _ = c.Wait() }()

	time.Sleep(400 * time.Millisecond)
	if m := moves(); m != "" {
		t.Fatalf("a master without the VIP moved etcd's leader: %q", m)
	}
	write("holds", "", 0o644)
	deadline := time.Now().Add(10 * time.Second)
	for moves() == "" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if m := moves(); !strings.Contains(m, "move-leader 8211f1d0f64f3269") {
		t.Fatalf("the VIP holder leading etcd: moves %q, want move-leader to 8211f1d0f64f3269 (the voting member, not the learner); output:\n%s", m, out.String())
	}
	// Leadership gone: the holder's member no longer leads.
	write("self.txt", strings.Replace(self, "true", "false", 1), 0o644)
	if err := os.Remove(filepath.Join(dir, "moves")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	if m := moves(); m != "" {
		t.Errorf("a holder whose member does not lead moved etcd's leader: %q", m)
	}
}

// TestKubeVIPEtcdLeaderCheckWhere: the check runs on the masters with an
// etcd member (kubexm's etcd on the etcd hosts, kubeadm's stacked etcd on
// every master) when there is another member, on none with an external
// etcd, and nowhere once
// lb_kube_vip_etcd_leader_away is false, as a bool or as -e's "false".
func TestKubeVIPEtcdLeaderCheckWhere(t *testing.T) {
	task := roleTask(t, "loadbalancer", "kube-vip.yaml", "Load balancer - does this master keep etcd's leader off the VIP")
	expr := task["set_fact"].(map[string]any)["lb_kube_vip_etcd_leader_here"].(string)
	ev := eval.New()
	for _, c := range []struct {
		name, etcdType, host string
		away                 any
		want                 bool
	}{
		{"kubexm's etcd, a member", "kubexm", "n1", true, true},
		{"kubexm's etcd, no member here", "kubexm", "n4", true, false},
		{"kubeadm's stacked etcd", "kubeadm", "n4", true, true},
		{"an external etcd", "external", "n1", true, false},
		{"turned off", "kubeadm", "n1", false, false},
		{`turned off with -e's "false"`, "kubexm", "n1", "false", false},
		{`-e's "true"`, "kubexm", "n1", "true", true},
		{"kubexm's etcd, one member", "kubexm", "n9", true, false},
		{"kubeadm's stacked etcd, one master", "kubeadm", "n9", true, false},
	} {
		groups := map[string]any{"etcd": []any{"n1", "n2", "n3"}, "master": []any{"n1", "n4", "n5"}}
		if c.host == "n9" {
			groups = map[string]any{"etcd": []any{"n9"}, "master": []any{"n9"}}
		}
		v := map[string]any{
			"etcd_type": c.etcdType, "inventory_hostname": c.host, "lb_kube_vip_etcd_leader_away": c.away,
			"groups": groups,
		}
		got, err := ev.RenderValue(expr, v)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got != c.want {
			t.Errorf("%s: %v (%T), want %v", c.name, got, got, c.want)
		}
	}
}
