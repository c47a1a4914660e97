package main

import "fmt"

func exprs() {
	v := vars()
	v["preflight_supported_os"] = map[string]any{"debian": []any{"11", "12"}, "rocky": []any{"9"}}
	v["preflight_os"] = map[string]any{"skipped": false, "stdout_lines": []any{"rocky", "9.3"}}
	v["preflight_findings"] = []any{map[string]any{"check": "ntp", "level": "warn"}, map[string]any{"check": "resolv", "level": "error"}}
	v["preflight_ignore"] = "resolv"
	v["os_firewalld"] = "firewalld disabled inactive"
	v["etcd_health"] = map[string]any{"rc": 0, "stdout_lines": []any{"https://a:2379 is healthy: x", "https://b:2379 is healthy: x", "https://c:2379 is unhealthy: x"}}
	for _, e := range []string{
		`not preflight_os.skipped and not any(preflight_supported_os[preflight_os.stdout_lines[0]] ?? [], {# == preflight_os.stdout_lines[1] or hasPrefix(preflight_os.stdout_lines[1], # + ".")})`,
		`any(preflight_findings, .level == "warn" or .check in split(preflight_ignore, ","))`,
		`none(preflight_findings, .level == "error" and .check not in split(preflight_ignore, ","))`,
		`inventory_hostname matches "^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"`,
		`os_firewalld contains " enabled" or os_firewalld endsWith " active"`,
		`(spec.system.timezone ?? "") != ""`,
		`len(spec.extra.resolves ?? []) > 0`,
		`not (etcd_started.changed ?? false)`,
		`delete_packages ?? false`,
		`etcd_health.rc == 0 and len(filter(etcd_health.stdout_lines, # contains " is healthy")) == len(groups.etcd)`,
		`not (download_sum_local.skipped ?? false) and not (download_sums.skipped ?? false)`,
		`any(split(trim("127.0.1.1 ::1"), " "), # in ["127.0.0.1", "::1"])`,
		`int("3") > 5`,
	} {
		r, err := ev.Eval(e, v)
		fmt.Printf("%v | %v | %s\n", r, err, e)
	}
}
