//go:build integration

package network

import (
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"

	"github.com/mensylisir/kubexm/engine/step"
)

// TestIntegrationDNSQuery asks a DNS server on the control machine (on the
// machines' bridge) from a test machine over SSH: the machines have bash and
// coreutils but no DNS tool.
func TestIntegrationDNSQuery(t *testing.T) {
	set := steptest.Machines(t)
	s := startTestDNSAt(t, set.Gateway)
	env := steptest.RemoteEnv(t, set, 0)
	q := func(extra step.Args) step.Result {
		args := step.Args{"server": set.Gateway, "port": s.port, "name": "kubernetes.default.svc.cluster.local", "timeout": "3s"}
		for k, v := range extra {
			args[k] = v
		}
		return steptest.Run(t, dnsQueryBuiltin{}, env, args)
	}
	if res := q(nil); res.Failed || res.Data["values"].([]any)[0] != "10.96.0.1" || res.Data["protocol"] != "udp" {
		t.Errorf("A over UDP: %+v", res)
	}
	if res := q(step.Args{"type": "AAAA", "protocol": "tcp"}); res.Failed || res.Data["values"].([]any)[0] != "fd00::1" {
		t.Errorf("AAAA over TCP: %+v", res)
	}
	if res := q(step.Args{"name": "big.example"}); res.Failed || len(res.Data["values"].([]any)) != 40 || res.Data["protocol"] != "tcp" {
		t.Errorf("truncated: %+v", res)
	}
	if res := q(step.Args{"name": "nope.example"}); !res.Failed || res.Data["rcode"] != "NXDOMAIN" {
		t.Errorf("NXDOMAIN: %+v", res)
	}
	env.Become = true
	if res := q(step.Args{"type": "PTR", "name": "10.96.0.1"}); res.Failed || !strings.HasPrefix(res.Data["values"].([]any)[0].(string), "kubernetes.") {
		t.Errorf("PTR with become: %+v", res)
	}
}
