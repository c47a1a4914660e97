//go:build integration

package transfer

import (
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"

	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/engine/transport/local"
	"github.com/mensylisir/kubexm/engine/transport/ssh"
	"github.com/mensylisir/kubexm/inventory"
)

// TestIntegrationDistributeRelay sends one file (KUBEXM_RELAY_MB, default
// 200 MB) to every test machine twice in the same run: direct uploads
// (relay: false), then host to host, and compares the control machine's
// upload and the wall time. Acceptance (issue 25): on 30 machines the
// relay uploads at most 3× the file (checked) in less than half the direct
// time (checked on machines brought up with LINK_RATE, see below).
//
//	make hosts-up N=30 PREFIX=x LINK_RATE=1gbit; source <run>/hosts.env
//	go test -tags integration ./builtins -run IntegrationDistributeRelay -v -timeout 60m
func TestIntegrationDistributeRelay(t *testing.T) {
	set := steptest.Machines(t)
	mb := 200
	if v := os.Getenv("KUBEXM_RELAY_MB"); v != "" {
		var err error
		if mb, err = strconv.Atoi(v); err != nil {
			t.Fatalf("KUBEXM_RELAY_MB=%q: %v", v, err)
		}
	}
	src := filepath.Join(t.TempDir(), "big")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(f, rand.Reader, int64(mb)<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	size := int64(mb) << 20
	sums := &transport.SumCache{}
	var uplink atomic.Int64
	envs := make([]*step.Env, len(set.Hosts))
	for i, h := range set.Hosts {
		tr, err := ssh.Dial(t.Context(), &inventory.Host{Name: h.Name, Address: h.Address, Port: h.Port, User: "root", PrivateKeyPath: set.KeyPath},
			ssh.Options{HostKeyChecking: ssh.Off, Sums: sums})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		env, _ := steptest.Env(t)
		env.Host, env.Control = h.Name, local.New("localhost", local.WithSums(sums))
		env.Target = countingHost{Transport: tr, uplink: &uplink}
		env.Vars = map[string]any{"internal_address": h.Address}
		envs[i] = env
	}
	const dir = "/var/tmp/kubexm-relay"
	clean := func() {
		var wg sync.WaitGroup
		for _, env := range envs {
			wg.Go(func() { steptest.Sh(t, env, "rm -rf "+dir) })
		}
		wg.Wait()
	}
	t.Cleanup(clean)
	send := func(relay bool) (time.Duration, int64) {
		clean()
		uplink.Store(0)
		d := newDistribute()
		errs := make([]error, len(envs))
		start := time.Now()
		var wg sync.WaitGroup
		for i, env := range envs {
			wg.Go(func() {
				_, errs[i] = steptest.RunBuiltin(t.Context(), env, d, step.Args{"src": src, "dest": dir + "/big", "mode": "0755", "relay": relay})
			})
		}
		wg.Wait()
		took := time.Since(start)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("relay=%v %s: %v", relay, set.Hosts[i].Name, err)
			}
		}
		want, _ := transport.FileSha256(src)
		sums := make([]string, len(envs))
		for i, env := range envs {
			wg.Go(func() { sums[i], errs[i] = env.Target.Sha256(t.Context(), dir+"/big", false) })
		}
		wg.Wait()
		for i := range envs {
			if errs[i] != nil || sums[i] != want {
				t.Fatalf("relay=%v %s: sha256 %q, %v", relay, set.Hosts[i].Name, sums[i], errs[i])
			}
		}
		return took, uplink.Load()
	}
	directTime, directBytes := send(false)
	relayTime, relayBytes := send(true)
	ratioTime := relayTime.Seconds() / directTime.Seconds()
	linkRate := os.Getenv("KUBEXM_TEST_LINK_RATE")
	links := linkRate
	if links == "" {
		links = "unlimited"
	}
	t.Logf("PERF distribute %d MB to %d hosts, links %s: direct %s, uploaded %.1f× the file; relay %s, uploaded %.1f× the file; time ratio relay/direct %.2f",
		mb, len(envs), links, directTime.Round(time.Millisecond), float64(directBytes)/float64(size),
		relayTime.Round(time.Millisecond), float64(relayBytes)/float64(size), ratioTime)
	if relayBytes > 3*size {
		t.Errorf("relay uploaded %.1f× the file, want at most 3×", float64(relayBytes)/float64(size))
	}
	// The time acceptance holds where links, not CPU, limit a transfer: on
	// machines brought up with LINK_RATE (up.sh shapes every NIC). Without
	// it all "network" is memory on one shared 2-core box and the hosts' CPU
	// (the receivers' sha256) limits the relay, so the ratio is checked only
	// when asked there (KUBEXM_RELAY_MAX_RATIO).
	maxRatio := os.Getenv("KUBEXM_RELAY_MAX_RATIO")
	if maxRatio == "" && linkRate != "" {
		maxRatio = "0.5"
	}
	if maxRatio != "" {
		max, err := strconv.ParseFloat(maxRatio, 64)
		if err != nil {
			t.Fatalf("KUBEXM_RELAY_MAX_RATIO=%q: %v", maxRatio, err)
		}
		if ratioTime >= max {
			t.Errorf("relay took %.2f of the direct time, want less than %.2f", ratioTime, max)
		}
	}
}
