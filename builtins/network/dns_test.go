package network

import (
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/engine/step"
)

// testDNSServer answers on 127.0.0.1 (or addr) over UDP and TCP (the same port):
// kubernetes.default.svc.cluster.local A 10.96.0.1 and AAAA fd00::1 (with
// the name compressed), _https._tcp.kubernetes.default.svc.cluster.local SRV,
// 1.0.96.10.in-addr.arpa PTR, big.example A with 40 records (truncated over
// UDP), anything else NXDOMAIN. It counts the queries per protocol.
type testDNSServer struct {
	port     int
	udp, tcp atomic.Int32
}

func startTestDNS(t *testing.T) *testDNSServer { return startTestDNSAt(t, "127.0.0.1") }

// startTestDNSAt is startTestDNS on another local address.
func startTestDNSAt(t *testing.T, addr string) *testDNSServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	port := pc.LocalAddr().(*net.UDPAddr).Port
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
	if err != nil {
		pc.Close()
		t.Skipf("TCP port %d is taken: %v", port, err)
	}
	s := &testDNSServer{port: port}
	t.Cleanup(func() { pc.Close(); ln.Close() })
	go func() {
		buf := make([]byte, 65535)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			s.udp.Add(1)
			_, _ = pc.WriteTo(testDNSReply(buf[:n], true), addr)
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var l [2]byte
				if _, err := io.ReadFull(c, l[:]); err != nil {
					return
				}
				q := make([]byte, binary.BigEndian.Uint16(l[:]))
				if _, err := io.ReadFull(c, q); err != nil {
					return
				}
				s.tcp.Add(1)
				r := testDNSReply(q, false)
				// Kept open afterwards, as real servers do.
				_, _ = c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(r))), r...))
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	return s
}

func testDNSReply(q []byte, udp bool) []byte {
	name, next, err := dnsName(q, 12)
	if err != nil {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[next:])
	r := append([]byte{}, q[:next+4]...)
	flags := uint16(0x8180) // response, RD, RA
	type rr struct {
		typ  uint16
		data []byte
	}
	var rrs []rr
	switch {
	case name == "kubernetes.default.svc.cluster.local." && qtype == dnsTypes["A"]:
		rrs = append(rrs, rr{qtype, []byte{10, 96, 0, 1}})
	case name == "kubernetes.default.svc.cluster.local." && qtype == dnsTypes["AAAA"]:
		rrs = append(rrs, rr{qtype, netip.MustParseAddr("fd00::1").AsSlice()})
	case name == "_https._tcp.kubernetes.default.svc.cluster.local." && qtype == dnsTypes["SRV"]:
		// The target points into the question name (offset 12 + len("\x06_https\x04_tcp")).
		data := []byte{0, 0, 0, 100, 0x01, 0xbb, 0xc0, byte(12 + 7 + 5)}
		rrs = append(rrs, rr{qtype, data})
	case name == "1.0.96.10.in-addr.arpa." && qtype == dnsTypes["PTR"]:
		rrs = append(rrs, rr{qtype, []byte("\x0akubernetes\x07default\x03svc\x07cluster\x05local\x00")})
	case name == "big.example." && qtype == dnsTypes["A"]:
		for i := range 40 {
			rrs = append(rrs, rr{qtype, []byte{10, 0, 0, byte(i)}})
		}
	case name == "kubernetes.default.svc.cluster.local.":
	default:
		flags |= 3 // NXDOMAIN
	}
	if udp && len(rrs) > 30 {
		flags |= 0x0200 // TC
		rrs = nil
	}
	binary.BigEndian.PutUint16(r[2:], flags)
	binary.BigEndian.PutUint16(r[6:], uint16(len(rrs)))
	for _, x := range rrs {
		r = append(r, 0xc0, 12) // the question's name
		r = binary.BigEndian.AppendUint16(r, x.typ)
		r = binary.BigEndian.AppendUint16(r, 1)
		r = binary.BigEndian.AppendUint32(r, 30)
		r = binary.BigEndian.AppendUint16(r, uint16(len(x.data)))
		r = append(r, x.data...)
	}
	return r
}

func TestDNSQuery(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	s := startTestDNS(t)
	env, _ := steptest.Env(t)
	q := func(extra step.Args) step.Result {
		args := step.Args{"server": "127.0.0.1", "port": s.port, "name": "kubernetes.default.svc.cluster.local", "timeout": "2s"}
		for k, v := range extra {
			args[k] = v
		}
		return steptest.Run(t, dnsQueryBuiltin{}, env, args)
	}

	res := q(nil)
	if res.Failed || res.Changed || res.Data["rcode"] != "NOERROR" || res.Data["protocol"] != "udp" {
		t.Fatalf("A: %+v", res)
	}
	if v := res.Data["values"].([]any); len(v) != 1 || v[0] != "10.96.0.1" {
		t.Errorf("A values = %v", v)
	}
	if a := res.Data["answers"].([]any)[0].(map[string]any); a["name"] != "kubernetes.default.svc.cluster.local." || a["type"] != "A" || a["ttl"] != 30 {
		t.Errorf("A answer = %v", a)
	}

	if res := q(step.Args{"type": "AAAA", "protocol": "tcp"}); res.Failed || res.Data["values"].([]any)[0] != "fd00::1" || res.Data["protocol"] != "tcp" {
		t.Errorf("AAAA over TCP: %+v", res)
	}
	if res := q(step.Args{"type": "SRV", "name": "_https._tcp.kubernetes.default.svc.cluster.local."}); res.Failed ||
		res.Data["values"].([]any)[0] != "0 100 443 kubernetes.default.svc.cluster.local." {
		t.Errorf("SRV: %+v", res)
	}
	if res := q(step.Args{"type": "PTR", "name": "10.96.0.1"}); res.Failed || res.Data["name"] != "1.0.96.10.in-addr.arpa." ||
		res.Data["values"].([]any)[0] != "kubernetes.default.svc.cluster.local." {
		t.Errorf("PTR: %+v", res)
	}

	// No such name: a failure, unless allow_empty; NODATA likewise.
	if res := q(step.Args{"name": "nope.cluster.local"}); !res.Failed || res.Data["rcode"] != "NXDOMAIN" || !strings.Contains(res.Msg, "NXDOMAIN") {
		t.Errorf("NXDOMAIN: %+v", res)
	}
	if res := q(step.Args{"name": "nope.cluster.local", "allow_empty": true}); res.Failed || res.Data["rcode"] != "NXDOMAIN" || len(res.Data["values"].([]any)) != 0 {
		t.Errorf("NXDOMAIN allowed: %+v", res)
	}
	if res := q(step.Args{"type": "TXT"}); !res.Failed || res.Data["rcode"] != "NOERROR" || !strings.Contains(res.Msg, "no TXT record") {
		t.Errorf("NODATA: %+v", res)
	}

	// Truncated over UDP: asked again over TCP.
	tcpBefore := s.tcp.Load()
	if res := q(step.Args{"name": "big.example"}); res.Failed || len(res.Data["values"].([]any)) != 40 || res.Data["protocol"] != "tcp" || s.tcp.Load() != tcpBefore+1 {
		t.Errorf("truncated: %+v", res)
	}

	// Nobody listening: every try fails, and the task fails (not an error).
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deaf := pc.LocalAddr().(*net.UDPAddr).Port
	defer pc.Close()
	res = steptest.Run(t, dnsQueryBuiltin{}, env, step.Args{"server": "127.0.0.1", "port": deaf, "name": "a.example", "timeout": "300ms", "tries": 2})
	if !res.Failed || !strings.Contains(res.Msg, "no answer over udp after 2 tries") {
		t.Errorf("deaf server: %+v", res)
	}
	pc.Close()
	res = steptest.Run(t, dnsQueryBuiltin{}, env, step.Args{"server": "127.0.0.1", "port": deaf, "name": "a.example", "protocol": "tcp", "timeout": "2s", "tries": 1})
	if !res.Failed || !strings.Contains(strings.ToLower(res.Msg), "refused") {
		t.Errorf("closed TCP port: %+v", res)
	}

	// Arguments that cannot work are errors.
	for _, bad := range []step.Args{
		{"server": "dns.example", "name": "a.example"},
		{"server": "127.0.0.1", "name": "a..example"},
		{"server": "127.0.0.1", "name": "a.example", "type": "HINFO"},
	} {
		if _, err := steptest.RunBuiltin(t.Context(), env, dnsQueryBuiltin{}, bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

func TestDNSParse(t *testing.T) {
	q, err := dnsQueryMessage(7, "a.example", dnsTypes["A"])
	if err != nil {
		t.Fatal(err)
	}
	r := testDNSReply(q, true)
	if _, err := parseDNSAnswer(r, 8); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("wrong id: %v", err)
	}
	if _, err := parseDNSAnswer(q, 7); err == nil || !strings.Contains(err.Error(), "not a response") {
		t.Errorf("a query: %v", err)
	}
	// A name pointer to itself must not loop forever.
	loop := append([]byte{}, r[:12]...)
	binary.BigEndian.PutUint16(loop[4:], 1)
	loop = append(loop, 0xc0, 12)
	if _, err := parseDNSAnswer(loop, 7); err == nil || !strings.Contains(err.Error(), "loop") {
		t.Errorf("pointer loop: %v", err)
	}
	if got := reverseName(netip.MustParseAddr("fd00::1")); !strings.HasPrefix(got, "1.0.0.0.") || !strings.HasSuffix(got, ".0.0.d.f.ip6.arpa.") {
		t.Errorf("reverse fd00::1 = %s", got)
	}
}
