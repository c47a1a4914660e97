package e2e

// The fast part of the etcd suite, without machines (no build tag): the
// create-cluster and delete playbooks load with the real builtins, and the
// etcd and chrony templates render what the roles intend.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/engine/eval"
	"github.com/mensylisir/kubexm/engine/step"
)

// moduleRoot is the directory holding go.mod above the test's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the working directory")
		}
		dir = parent
	}
}

func loadOptions() engine.LoadOptions {
	m := map[string]step.Builtin{}
	for _, b := range builtins.All() {
		m[b.Spec().Name] = b
	}
	return engine.LoadOptions{Builtins: m}
}

func TestPlaybooksLoad(t *testing.T) {
	root := moduleRoot(t)
	for name, wantTags := range map[string][][]string{
		// One phase after the other; each mode's plays inside their phase.
		// etcd's health is the control-plane phase's check, after the
		// runtime's plays that its first election overlaps.
		"create-cluster": {{"preflight"}, {"always"}, {"os"}, {"etcd"}, {"registry", "runtime"}, {"containerd", "runtime"}, {"images", "runtime"},
			{"kubernetes", "loadbalancer"}, {"kubernetes", "pki"}, {"etcd", "kubernetes", "control-plane"}, {"kubernetes", "control-plane"}, {"kubernetes", "loadbalancer"},
			{"kubernetes", "kubeadm", "control-plane"}, {"kubernetes", "kubeadm", "control-plane"}, {"kubernetes", "kubeadm", "auto-renew"},
			{"kubernetes", "loadbalancer"}, {"kubernetes", "node"}, {"kubernetes", "kubeadm", "node"},
			{"network", "cni"}, {"coredns", "dns"}, {"finalize"}, {"nodelocaldns", "dns", "addons"}, {"metrics-server", "addons"}, {"user-addons", "addons"}, {"health"}, {"always"},
			{"cluster-resource"}, {"kubexm-controller"}},
		"delete": {{"user-addons", "addons"}, {"metrics-server", "addons"}, {"nodelocaldns", "dns", "addons"}, {"coredns", "dns"}, {"kubernetes", "kubeadm"}, {"kubernetes", "node"},
			{"loadbalancer"}, {"kubernetes", "control-plane"}, {"kubernetes", "pki"}, {"images", "runtime"}, {"registry", "runtime"}, {"containerd", "runtime"},
			{"nodelocaldns", "dns", "addons"}, {"network", "cni"}, {"etcd"}, {"kubexm-controller"}, {"os"}},
		// A new master's control plane, then every node's proxy, before
		// the new kubelets use the endpoint.
		// kubeadm mode: kubeadm on the new nodes, the first master's init
		// configuration, the new masters join, the workers' proxies get
		// them, then the new workers join.
		// A new etcd member, then the existing masters' API servers on it.
		"add-nodes": {{"always"}, {"always"}, {"preflight"}, {"os"}, {"etcd"}, {"etcd", "kubernetes", "control-plane"}, {"containerd", "runtime"}, {"images", "runtime"},
			{"kubernetes", "pki"}, {"kubernetes", "control-plane"}, {"kubernetes", "loadbalancer"}, {"kubernetes", "node"},
			{"kubernetes", "kubeadm"}, {"kubernetes", "kubeadm", "control-plane"}, {"kubernetes", "kubeadm", "control-plane"}, {"kubernetes", "loadbalancer"}, {"kubernetes", "kubeadm", "node"},
			{"network", "cni"}, {"finalize"}, {"health"}, {"always"}, {"cluster-resource"}, {"kubexm-controller"}},
		// The checks, the masters out of the proxies' backends and out of
		// kube-vip's election, the API servers off the etcd members named,
		// the removals, then the cleanup.
		"delete-nodes": {{"always"}, {"always"}, {"always"}, {"always"}, {"always"}, {"kubernetes", "kubeadm"}, {"kubernetes", "node"}, {"loadbalancer"},
			{"kubernetes", "control-plane"}, {"kubernetes", "pki"}, {"images", "runtime"}, {"containerd", "runtime"},
			{"nodelocaldns", "dns", "addons"}, {"network", "cni"}, {"etcd"}, {"os"}, {"cluster-resource"}},
	} {
		pb, err := engine.Load(context.Background(), filepath.Join(root, "playbooks", name), loadOptions())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(pb.Plays) != len(wantTags) {
			t.Fatalf("%s: %d plays, want %d", name, len(pb.Plays), len(wantTags))
		}
		for i, p := range pb.Plays {
			if !slices.Equal(p.Tags, wantTags[i]) {
				t.Errorf("%s: play %q has tags %v, want %v", name, p.Name, p.Tags, wantTags[i])
			}
		}
	}
}

// etcdTuning are the role variables roles/etcd/defaults/main.yaml maps
// from spec.etcd's tuning fields.
var etcdTuning = map[string]string{
	"etcd_heartbeat_interval": "heartbeatInterval", "etcd_election_timeout": "electionTimeout",
	"etcd_snapshot_count": "snapshotCount", "etcd_auto_compaction_retention": "autoCompactionRetention",
	"etcd_metrics": "metrics", "etcd_quota_backend_bytes": "quotaBackendBytes", "etcd_max_request_bytes": "maxRequestBytes",
	"etcd_max_wals": "maxWals", "etcd_max_snapshots": "maxSnapshots", "etcd_log_level": "logLevel",
}

// sampleVars are the variables of member n1 of a three-member cluster.
func sampleVars(addrs [3]string) map[string]any {
	hostvars := map[string]any{}
	for i, n := range []string{"n1", "n2", "n3"} {
		hostvars[n] = map[string]any{"internal_address": addrs[i], "address": addrs[i], "arch": "amd64"}
	}
	vars := map[string]any{
		"inventory_hostname": "n1", "internal_address": addrs[0], "address": addrs[0], "arch": "amd64",
		"cluster_name": "c1",
		"groups":       map[string]any{"all": []any{"n1", "n2", "n3"}, "etcd": []any{"n1", "n2", "n3"}},
		"hostvars":     hostvars,
		"spec": map[string]any{
			// As schema.SetDefaults leaves it for etcd.type kubexm, but
			// for the values this test sets.
			"etcd": map[string]any{"dataDir": "/data/etcd", "heartbeatInterval": 300, "electionTimeout": 3000, "maxSnapshots": 0,
				"snapshotCount": 10000, "autoCompactionRetention": 8, "metrics": "basic", "quotaBackendBytes": 2147483648,
				"maxRequestBytes": 1572864, "maxWals": 5, "logLevel": "info"},
			"system": map[string]any{"ntpServers": []any{"n1", "pool.example.org"}},
		},
		"etcd_address": strings.Split(addrs[0], ",")[0], "etcd_client_port": 2379, "etcd_peer_port": 2380,
		"etcd_cert_dir": "/etc/kubexm/etcd/ssl", "etcd_data_dir": "/data/etcd", "etcd_cluster_token": "kubexm-c1",
		"etcd_bin_dir": "/usr/local/bin", "etcd_config_dir": "/etc/kubexm/etcd",
		"os_backup_dir": "/var/lib/kubexm/os-backup", "etcd_join_existing": false,
		"etcd_extra_config": map[string]any{},
		// roles/os maps spec.system.ntpServers (its defaults/main.yaml).
		"os_ntp_servers": []any{"n1", "pool.example.org"},
	}
	etcd := vars["spec"].(map[string]any)["etcd"].(map[string]any)
	for name, field := range etcdTuning {
		vars[name] = etcd[field]
	}
	return vars
}

func renderRoleTemplate(t *testing.T, role, name string, vars map[string]any) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(moduleRoot(t), "roles", role, "templates", name))
	if err != nil {
		t.Fatal(err)
	}
	out, err := eval.New().RenderString(string(src), vars)
	if err != nil {
		t.Fatalf("%s/%s: %v", role, name, err)
	}
	return out
}

func TestEtcdConfigTemplate(t *testing.T) {
	for _, tc := range []struct {
		version                string
		addrs                  [3]string
		initialCluster, client string
	}{
		{"v3.6.16", [3]string{"10.0.0.1", "10.0.0.2", "10.0.0.3"},
			"n1=https://10.0.0.1:2380,n2=https://10.0.0.2:2380,n3=https://10.0.0.3:2380", "https://10.0.0.1:2379"},
		// Dual stack: the first address; IPv6 only: brackets.
		{"v3.6.16", [3]string{"10.0.0.1,fd00::1", "fd00::2", "fd00::3"},
			"n1=https://10.0.0.1:2380,n2=https://[fd00::2]:2380,n3=https://[fd00::3]:2380", "https://10.0.0.1:2379"},
		{"v3.5.35", [3]string{"10.0.0.1", "10.0.0.2", "10.0.0.3"},
			"n1=https://10.0.0.1:2380,n2=https://10.0.0.2:2380,n3=https://10.0.0.3:2380", "https://10.0.0.1:2379"},
		// A member joining a running cluster (add-nodes): the members etcd
		// has, as the role read them.
		{"v3.6.16", [3]string{"10.0.0.1", "10.0.0.2", "10.0.0.3"},
			"n2=https://10.0.0.2:2380,n1=https://10.0.0.1:2380", "https://10.0.0.1:2379"},
	} {
		vars := sampleVars(tc.addrs)
		vars["etcd_version"] = tc.version
		join := !strings.Contains(tc.initialCluster, "n3=")
		if join {
			vars["etcd_join_existing"] = true
			vars["etcd_join_members"] = map[string]any{"stdout": tc.initialCluster + "\n"}
		}
		out := renderRoleTemplate(t, "etcd", "etcd.conf.yml.tmpl", vars)
		var cfg map[string]any
		if err := yaml.Unmarshal([]byte(out), &cfg); err != nil {
			t.Fatalf("etcd.conf.yml is not YAML: %v\n%s", err, out)
		}
		want := map[string]any{
			"name":                  "n1",
			"data-dir":              "/data/etcd",
			"initial-cluster":       tc.initialCluster,
			"advertise-client-urls": tc.client,
			"initial-cluster-state": map[bool]string{false: "new", true: "existing"}[join],
			"heartbeat-interval":    uint64(300),
			"election-timeout":      uint64(3000),
			"max-wals":              uint64(5),
		}
		// max-snapshots is deprecated in etcd 3.6 (no v2 snapshots): 3.5 only.
		if tc.version < "v3.6" {
			want["max-snapshots"] = uint64(0) // 0 (unlimited) is kept, not defaulted
		} else if _, ok := cfg["max-snapshots"]; ok {
			t.Errorf("%s: max-snapshots is set:\n%s", tc.version, out)
		}
		for k, v := range want {
			if cfg[k] != v {
				t.Errorf("%s: %v (%T), want %v", k, cfg[k], cfg[k], v)
			}
		}
		for _, sec := range []string{"client-transport-security", "peer-transport-security"} {
			m, _ := cfg[sec].(map[string]any)
			if m["client-cert-auth"] != true || m["cert-file"] != "/etc/kubexm/etcd/ssl/member-n1.pem" || m["trusted-ca-file"] != "/etc/kubexm/etcd/ssl/ca.pem" {
				t.Errorf("%s: %v", sec, m)
			}
		}
	}

	// etcd_extra_config: a setting replaced (not written twice), one added,
	// one removed, a TLS setting merged into its mapping.
	vars := sampleVars([3]string{"10.0.0.1", "10.0.0.2", "10.0.0.3"})
	vars["etcd_version"] = "v3.6.16"
	vars["etcd_extra_config"] = map[string]any{
		"log-level": "warn", "experimental-initial-corrupt-check": true, "metrics": nil,
		"client-transport-security": map[string]any{"cipher-suites": []any{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}},
	}
	out := renderRoleTemplate(t, "etcd", "etcd.conf.yml.tmpl", vars)
	if n := strings.Count(out, "log-level:"); n != 1 {
		t.Errorf("log-level written %d times:\n%s", n, out)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(out), &cfg); err != nil {
		t.Fatalf("etcd.conf.yml is not YAML: %v\n%s", err, out)
	}
	cts, _ := cfg["client-transport-security"].(map[string]any)
	if cfg["log-level"] != "warn" || cfg["experimental-initial-corrupt-check"] != true || cfg["metrics"] != nil ||
		cfg["name"] != "n1" || cts["client-cert-auth"] != true || len(cts["cipher-suites"].([]any)) != 1 {
		t.Errorf("with etcd_extra_config:\n%s", out)
	}
	if pts, _ := cfg["peer-transport-security"].(map[string]any); pts["cipher-suites"] != nil {
		t.Errorf("the peer TLS settings got the client's cipher-suites:\n%s", out)
	}
	vars["etcd_extra_config"] = "log-level: warn"
	src, err := os.ReadFile(filepath.Join(moduleRoot(t), "roles", "etcd", "templates", "etcd.conf.yml.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eval.New().RenderString(string(src), vars); err == nil || !strings.Contains(err.Error(), "etcd_extra_config must be a mapping") {
		t.Errorf("a string as etcd_extra_config: %v", err)
	}
}

func TestChronyTemplate(t *testing.T) {
	vars := sampleVars([3]string{"10.0.0.1", "10.0.0.2", "10.0.0.3"})
	server := renderRoleTemplate(t, "os", "chrony.conf.tmpl", vars)
	for _, want := range []string{"server pool.example.org iburst", "allow 10.0.0.2", "allow 10.0.0.3", "local stratum 10"} {
		if !strings.Contains(server, want+"\n") {
			t.Errorf("n1 (named in ntpServers) lacks %q:\n%s", want, server)
		}
	}
	if strings.Contains(server, "server 10.0.0.1") {
		t.Errorf("n1 syncs from itself:\n%s", server)
	}
	vars["inventory_hostname"] = "n2"
	client := renderRoleTemplate(t, "os", "chrony.conf.tmpl", vars)
	for _, want := range []string{"server 10.0.0.1 iburst", "server pool.example.org iburst"} {
		if !strings.Contains(client, want+"\n") {
			t.Errorf("n2 lacks %q:\n%s", want, client)
		}
	}
	if strings.Contains(client, "allow") || strings.Contains(client, "local stratum") {
		t.Errorf("n2 serves time although it is not named in ntpServers:\n%s", client)
	}
}

// The scheduled snapshots' units carry every value as an environment
// variable of the service, and the script, run here with stand-ins for
// etcdctl and etcdutl, keeps the newest KEEP snapshots of its member, leaves
// other files alone, and never keeps a snapshot etcdutl refuses.
func TestEtcdBackupTimer(t *testing.T) {
	vars := sampleVars([3]string{"10.0.0.1", "10.0.0.2", "10.0.0.3"})
	for k, v := range map[string]any{"etcd_backup_period": "90", "etcd_backup_dir": "/srv/etcd-snapshots", "etcd_backup_keep": "3",
		"etcd_backup_script": "/usr/local/bin/kubexm-etcd-backup"} {
		vars[k] = v
	}
	service := renderRoleTemplate(t, "etcd", "kubexm-etcd-backup.service.tmpl", vars)
	for _, want := range []string{"Environment=BACKUP_DIR=/srv/etcd-snapshots\n", "Environment=KEEP=3\n", "Environment=NAME=n1\n",
		"Environment=ENDPOINT=https://127.0.0.1:2379\n", "Environment=CERT=/etc/kubexm/etcd/ssl/admin-n1.pem\n",
		"ExecStart=/bin/sh /usr/local/bin/kubexm-etcd-backup\n"} {
		if !strings.Contains(service, want) {
			t.Errorf("the service lacks %q:\n%s", want, service)
		}
	}
	if timer := renderRoleTemplate(t, "etcd", "kubexm-etcd-backup.timer.tmpl", vars); !strings.Contains(timer, "OnUnitActiveSec=90min\n") {
		t.Errorf("the timer:\n%s", timer)
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	backups := filepath.Join(dir, "backups")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// etcdctl writes its last argument; etcdutl refuses a file holding "bad".
	for name, text := range map[string]string{
		"etcdctl": "#!/bin/sh\nfor a; do f=$a; done\necho \"${SNAPSHOT:-good}\" > \"$f\"\n",
		"etcdutl": "#!/bin/sh\ngrep -q good \"$3\"\n",
	} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(backups, 0o700); err != nil {
		t.Fatal(err)
	}
	// Older snapshots of n1 and n2, and a file of the user's.
	for _, f := range []string{"etcd-n1-20260101T000000Z.db", "etcd-n1-20260102T000000Z.db", "etcd-n1-20260103T000000Z.db",
		"etcd-n2-20260101T000000Z.db", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(backups, f), []byte("old\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(moduleRoot(t), "roles", "etcd", "files", "kubexm-etcd-backup.sh")
	run := func(snapshot string) (string, error) {
		cmd := exec.Command("/bin/sh", script)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "BACKUP_DIR=" + backups, "KEEP=3", "NAME=n1", "SNAPSHOT=" + snapshot,
			"ETCDCTL=" + filepath.Join(bin, "etcdctl"), "ETCDUTL=" + filepath.Join(bin, "etcdutl"),
			"ENDPOINT=https://127.0.0.1:2379", "CACERT=ca.pem", "CERT=c.pem", "KEY=k.pem"}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("good")
	if err != nil {
		t.Fatalf("the snapshot script: %v\n%s", err, out)
	}
	entries, err := os.ReadDir(backups)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	// The two oldest of n1 went (3 kept: the new one and the two newest).
	kept := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n > "etcd-n1-20260103T000000Z.db" && n < "etcd-n2" })
	want := []string{"etcd-n1-20260102T000000Z.db", "etcd-n1-20260103T000000Z.db", "etcd-n2-20260101T000000Z.db", "notes.txt"}
	if len(names) != 5 || !slices.Equal(kept, want) {
		t.Errorf("after one snapshot with KEEP=3: %v\n%s", names, out)
	}
	if !strings.Contains(out, "removed the older snapshot "+filepath.Join(backups, "etcd-n1-20260101T000000Z.db")) {
		t.Errorf("the script does not say what it removed:\n%s", out)
	}

	// A snapshot etcdutl refuses: the run fails, nothing is removed, no
	// part file is left.
	if out, err := run("bad"); err == nil {
		t.Errorf("a refused snapshot: the script succeeded:\n%s", out)
	}
	after, _ := os.ReadDir(backups)
	if len(after) != len(entries) {
		var got []string
		for _, e := range after {
			got = append(got, e.Name())
		}
		t.Errorf("a refused snapshot changed the directory: %v", got)
	}
}

// A member with data keeps the initial-cluster settings it started with:
// etcd reads them only at the first start, so a member list changed since
// (a member added by add-nodes) must not rewrite the file and restart it.
func TestEtcdConfigKeepsTheInitialCluster(t *testing.T) {
	vars := sampleVars([3]string{"10.0.0.1", "10.0.0.2", "10.0.0.3"})
	vars["etcd_version"] = "v3.6.16"
	first := renderRoleTemplate(t, "etcd", "etcd.conf.yml.tmpl", vars)

	// n4 joined later (add-nodes): the member list grew since n1 started.
	vars["groups"].(map[string]any)["etcd"] = []any{"n1", "n2", "n3", "n4"}
	vars["hostvars"].(map[string]any)["n4"] = map[string]any{"internal_address": "10.0.0.4"}
	grown := renderRoleTemplate(t, "etcd", "etcd.conf.yml.tmpl", vars)
	if !strings.Contains(grown, "n4=https://10.0.0.4:2380") {
		t.Fatalf("a member yet to start does not get the whole member list:\n%s", grown)
	}

	vars["etcd_started_with"] = map[string]any{"stdout": first}
	kept := renderRoleTemplate(t, "etcd", "etcd.conf.yml.tmpl", vars)
	if kept != first {
		t.Errorf("a member with data got a new configuration for a member list changed since it started:\n%s\nwant\n%s", kept, first)
	}

	// The joined member itself keeps "existing" and the list it joined with.
	vars["inventory_hostname"] = "n4"
	vars["etcd_address"] = "10.0.0.4"
	vars["etcd_join_existing"] = false
	joined := "initial-cluster: n1=https://10.0.0.1:2380,n4=https://10.0.0.4:2380\ninitial-cluster-state: existing\n"
	vars["etcd_started_with"] = map[string]any{"stdout": joined}
	out := renderRoleTemplate(t, "etcd", "etcd.conf.yml.tmpl", vars)
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(out), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg["initial-cluster"] != "n1=https://10.0.0.1:2380,n4=https://10.0.0.4:2380" || cfg["initial-cluster-state"] != "existing" {
		t.Errorf("the joined member's initial settings were not kept:\n%s", out)
	}
}
