package main

import (
	"fmt"
	"os"
)

func vars() map[string]any {
	hv := map[string]any{}
	for i, n := range []string{"n1", "n2", "n3"} {
		hv[n] = map[string]any{"internal_address": fmt.Sprintf("10.77.0.%d", 11+i), "address": fmt.Sprintf("10.77.0.%d", 11+i), "arch": "amd64"}
	}
	return map[string]any{
		"inventory_hostname": "n1", "internal_address": "10.77.0.11", "address": "10.77.0.11", "arch": "amd64",
		"cluster_name": "e2e", "work_dir": "/tmp/w/.kubexm/e2e",
		"groups":   map[string]any{"all": []any{"n1", "n2", "n3"}, "etcd": []any{"n1", "n2", "n3"}, "master": []any{"n1"}, "k8s_cluster": []any{"n1", "n2", "n3"}},
		"hostvars": hv,
		"spec": map[string]any{
			"etcd":       map[string]any{"dataDir": "/var/lib/etcd", "heartbeatInterval": 250, "maxSnapshots": 0},
			"kubernetes": map[string]any{"proxyMode": "iptables", "clusterName": "cluster.local"},
			"system":     map[string]any{"ntpServers": []any{"n1", "ntp.aliyun.com"}},
			"registry":   map[string]any{},
			"extra":      map[string]any{"hosts": []any{map[string]any{"domain": "a.b", "address": "1.2.3.4"}}, "resolves": []any{map[string]any{"address": "10.77.0.1"}}},
		},
		"etcd_address": "10.77.0.11", "etcd_client_port": 2379, "etcd_peer_port": 2380, "etcd_cert_dir": "/etc/kubexm/etcd/ssl",
		"etcd_data_dir": "/var/lib/etcd", "etcd_cluster_token": "kubexm-e2e", "etcd_bin_dir": "/usr/local/bin", "etcd_config_dir": "/etc/kubexm/etcd",
		"os_backup_dir": "/var/lib/kubexm/os-backup",
		"preflight_findings": []any{},
		"preflight_node": "n1 (10.77.0.11)",
		"preflight_hw": map[string]any{"stdout_lines": []any{"2", "24000000"}, "skipped": false},
		"preflight_min_memory_gb_master": 4, "preflight_min_memory_gb_worker": 2,
		"preflight_kernel": map[string]any{"stdout_lines": []any{"6.18.0", "old", "ip_vs", "x"}, "skipped": false},
		"preflight_min_kernel": "3.10",
		"download_mirrors": []any{"http://x/y/", "http://z"}, "download_file": "etcd-v3.5.35-linux-amd64.tar.gz",
		"download_sums": map[string]any{"results": []any{map[string]any{"status": 404}, map[string]any{"status": 200, "content": "1111111111111111111111111111111111111111111111111111111111111111  etcd-v3.5.35-linux-arm64.tar.gz\nabcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789  etcd-v3.5.35-linux-amd64.tar.gz\n"}}},
		"download_sha256": "", "download_local_dir": "",
	}
}

func show(name, s string) {
	v, err := ev.Render(s, vars())
	fmt.Printf("=== %s\n%#v\n%v\n", name, v, err)
}

func render() {
	for _, f := range []string{"roles/etcd/templates/etcd.conf.yml.tmpl", "roles/os/templates/chrony.conf.tmpl"} {
		b, _ := os.ReadFile(f)
		v, err := ev.RenderString(string(b), vars())
		fmt.Printf("=== %s\n%s\n%v\n", f, v, err)
	}
	show("hw", `{{ div (add (index .preflight_hw.stdout_lines 1 | atoi) 524288) 1048576 }}`)
	show("minmem", `{{ ternary .preflight_min_memory_gb_master .preflight_min_memory_gb_worker
         (or (has .inventory_hostname (default (list) .groups.master))
             (has .inventory_hostname (default (list) .groups.control_plane))) }}`)
	show("kernel", `{{ append .preflight_findings (dict "check" "kernel" "level" "error"
         "msg" (printf "Kernel check failed on node %s: kernel version %s%s%s."
                .preflight_node (index .preflight_kernel.stdout_lines 0)
                (ternary "" (printf " is too old (minimum %s)" .preflight_min_kernel) (eq (index .preflight_kernel.stdout_lines 1) "ok"))
                (ternary "" (printf " / required kernel modules not loaded and not loadable: %s" (join ", " (slice .preflight_kernel.stdout_lines 2)))
                         (eq (len .preflight_kernel.stdout_lines) 2)))) }}`)
	show("sha", `{{- if .download_sha256 }}{{ .download_sha256 }}
      {{- else if .download_local_dir }}{{ .download_sum_local.stdout | default "" }}
      {{- else }}
      {{- $found := "" }}
      {{- range .download_sums.results | default (list) }}
      {{- if and (not $found) (eq (int (.status | default 0)) 200) }}
      {{- $found = regexFind "^[0-9a-f]{64}" (regexFind (printf "(?m)^[0-9a-f]{64}[ \t]+[*]?%s[ \t]*$" (regexQuoteMeta $.download_file)) (.content | default "")) }}
      {{- end }}
      {{- end }}
      {{- $found }}
      {{- end }}`)
	show("urls", `{{- range .download_mirrors }}
      - "{{ trimSuffix "/" . }}/{{ $.download_file }}"
      {{- end }}`)
	show("hosts", `{{- $domain := .spec.kubernetes.clusterName | default "cluster.local" }}
      {{- range $name := .groups.all }}
      {{- range $ip := splitList "," (index $.hostvars $name "internal_address") }}
      {{ trim $ip }} {{ $name }}.{{ $domain }} {{ $name }}
      {{- end }}
      {{- end }}
      {{- $reg := .spec.registry.privateRegistry | default "" }}
      {{- if and $reg (default (list) .groups.registry) }}
      {{ index (splitList "," (index .hostvars (first .groups.registry) "internal_address")) 0 | trim }} {{ $reg }}
      {{- end }}
      {{- range .spec.extra.hosts | default (list) }}
      {{ .address }} {{ .domain }}
      {{- end }}`)
	show("ports", `{{ range $g, $ps := .preflight_ports }}{{ if has $.inventory_hostname (default (list) (index $.groups $g)) }}{{ range $ps }} {{ .port }}:{{ .owner }}{{ end }}{{ end }}{{ end }}`)
}
