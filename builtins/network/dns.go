package network

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/builtins/onhost"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
)

// dnsTypes are the record types dns_query asks for, with their numbers.
var dnsTypes = map[string]uint16{
	"A": 1, "NS": 2, "CNAME": 5, "SOA": 6, "PTR": 12, "MX": 15, "TXT": 16, "AAAA": 28, "SRV": 33,
}

var dnsRcodes = []string{"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED"}

// dnsScript runs on the host under bash, which opens UDP and TCP sockets
// through /dev/udp and /dev/tcp, so the host needs no DNS tool (dig,
// nslookup): $1 server, $2 port, $3 udp|tcp, $4 the query in hex (over TCP
// with its 2-byte length). It prints the answer as hex bytes (od), one
// datagram over UDP, one length-prefixed message over TCP.
const dnsScript = `set -o pipefail
q=
for ((i = 0; i < ${#4}; i += 2)); do q+="\\x${4:i:2}"; done
if [ "$3" = tcp ]; then
  exec 3<>"/dev/tcp/$1/$2" || exit 3
  printf '%b' "$q" >&3 || exit 4
  n=$(head -c 2 <&3 | od -An -tu1) || exit 5
  set -- $n
  [ $# -eq 2 ] || { echo "the connection closed without an answer" >&2; exit 5; }
  head -c $(($1 * 256 + $2)) <&3 | od -An -v -tx1
else
  exec 3<>"/dev/udp/$1/$2" || exit 3
  # One write, one datagram: printf writes in pieces around NUL bytes.
  printf '%b' "$q" | dd bs=65535 count=1 iflag=fullblock status=none >&3 || exit 4
  dd bs=65535 count=1 status=none <&3 | od -An -v -tx1
fi`

type dnsQueryBuiltin struct{}

func (dnsQueryBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "dns_query",
		Summary: "Ask a DNS server for the records of a name, from the host, and return the answer.",
		Doc: "The query is sent from the host (so a Service ClusterIP that kube-proxy makes reachable on the node can be " +
			"asked) by bash through its /dev/udp and /dev/tcp files; no DNS tool such as dig is needed, only bash and " +
			"coreutils. The name is always absolute: no search domains apply. A UDP answer that is truncated is asked " +
			"again over TCP. Each try waits up to `timeout`; a server that does not answer is tried `tries` times.\n\n" +
			"The result holds `rcode` (NOERROR, NXDOMAIN, SERVFAIL, ...), `values` (the data of the records of the asked " +
			"type: addresses for A and AAAA, names for CNAME, NS and PTR, `priority weight port target` for SRV, " +
			"`preference host` for MX, the text for TXT), `answers` (every record of the answer section as a map with " +
			"`name`, `type`, `ttl`, `data`), `server` and `protocol` (the one that gave the answer). The task fails when " +
			"the server does not answer, and, unless `allow_empty`, when the answer is not NOERROR with at least one record " +
			"of the type. It only reads, so it also runs in check mode, and never reports changed.",
		Args: []step.Arg{
			{Name: "name", Type: step.String, Required: true, Doc: "Name to look up, e.g. kubernetes.default.svc.cluster.local (a final dot is optional); for PTR an IP address is turned into its reverse name."},
			{Name: "server", Type: step.String, Required: true, Doc: "IP address of the DNS server, as the host reaches it."},
			{Name: "port", Type: step.Int, Default: 53, Doc: "Server port."},
			{Name: "type", Type: step.String, Default: "A", Choices: []string{"A", "AAAA", "CNAME", "MX", "NS", "PTR", "SOA", "SRV", "TXT"}, Doc: "Record type."},
			{Name: "protocol", Type: step.String, Default: "udp", Choices: []string{"udp", "tcp"}, Doc: "Transport of the first try; a truncated UDP answer is asked again over TCP."},
			{Name: "timeout", Type: step.Duration, Default: "5s", Doc: "How long one try waits for the answer."},
			{Name: "tries", Type: step.Int, Default: 2, Doc: "Tries when the server does not answer (a lost UDP datagram)."},
			{Name: "allow_empty", Type: step.Bool, Default: false, Doc: "Return an answer without records of the type (NXDOMAIN, NODATA, SERVFAIL) instead of failing."},
		},
		Examples: []string{
			"- name: CoreDNS answers for the API service\n  dns_query:\n    name: kubernetes.default.svc.cluster.local\n    server: 10.96.0.10\n  register: dns\n- assert:\n    that: ['\"10.96.0.1\" in dns.values']",
			"dns_query:\n  name: _https._tcp.kubernetes.default.svc.cluster.local\n  type: SRV\n  server: \"{{ .cluster_dns }}\"\n  protocol: tcp",
		},
	}
}

func (dnsQueryBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	qtype := strings.ToUpper(args.String("type"))
	if qtype == "" {
		qtype = "A"
	}
	tnum, ok := dnsTypes[qtype]
	if !ok {
		return step.Result{}, fmt.Errorf("dns_query: type %q is not one of %s", qtype, strings.Join(dnsTypeNames(), ", "))
	}
	server := strings.TrimSpace(args.String("server"))
	saddr, err := netip.ParseAddr(strings.Trim(server, "[]"))
	if err != nil {
		return step.Result{}, fmt.Errorf("dns_query: server %q is not an IP address", server)
	}
	port := args.Int("port")
	if port <= 0 || port > 65535 {
		return step.Result{}, fmt.Errorf("dns_query: port %d is out of range", port)
	}
	name := strings.TrimSpace(args.String("name"))
	if qtype == "PTR" {
		if a, err := netip.ParseAddr(name); err == nil {
			name = reverseName(a)
		}
	}
	proto := args.String("protocol")
	if err := onhost.CheckChoice("protocol", proto, "udp", "tcp"); err != nil {
		return step.Result{}, fmt.Errorf("dns_query: %w", err)
	}
	timeout := args.Duration("timeout")
	if timeout <= 0 {
		return step.Result{}, fmt.Errorf("dns_query: timeout %s is not positive", timeout)
	}
	tries := max(args.Int("tries"), 1)
	id := make([]byte, 2)
	_, _ = rand.Read(id)
	query, err := dnsQueryMessage(binary.BigEndian.Uint16(id), name, tnum)
	if err != nil {
		return step.Result{}, fmt.Errorf("dns_query: %w", err)
	}
	fqdn := strings.TrimSuffix(name, ".") + "."
	data := map[string]any{"name": fqdn, "type": qtype, "server": saddr.String(), "protocol": proto}
	what := fmt.Sprintf("%s %s at %s", fqdn, qtype, joinHostPortInt(saddr.String(), port))

	var msg []byte
	var lastErr string
	for try := 1; try <= tries && msg == nil; try++ {
		msg, lastErr, err = dnsExchange(ctx, env, saddr.String(), port, proto, query, timeout)
		if err != nil {
			return step.Result{}, err
		}
		if msg != nil && proto == "udp" && len(msg) > 2 && msg[2]&0x02 != 0 {
			onhost.Logf(env, "dns_query: %s: truncated over UDP, asking over TCP", what)
			proto = "tcp"
			data["protocol"] = proto
			msg, lastErr, err = dnsExchange(ctx, env, saddr.String(), port, proto, query, timeout)
			if err != nil {
				return step.Result{}, err
			}
		}
		if msg == nil && try < tries {
			onhost.Logf(env, "dns_query: %s: no answer (%s), trying again", what, lastErr)
		}
	}
	if msg == nil {
		return step.Result{Failed: true, Data: data,
			Msg: fmt.Sprintf("%s: no answer over %s after %d tries of %s: %s", what, proto, tries, timeout, lastErr)}, nil
	}
	ans, err := parseDNSAnswer(msg, binary.BigEndian.Uint16(query[0:2]))
	if err != nil {
		return step.Result{Failed: true, Data: data, Msg: fmt.Sprintf("%s: unusable answer: %v", what, err)}, nil
	}
	answers := make([]any, 0, len(ans.records))
	values := []any{}
	for _, r := range ans.records {
		answers = append(answers, map[string]any{"name": r.name, "type": r.typ, "ttl": int(r.ttl), "data": r.data})
		if r.typ == qtype {
			values = append(values, r.data)
		}
	}
	data["rcode"] = ans.rcode
	data["answers"] = answers
	data["values"] = values
	data["authoritative"] = ans.authoritative
	switch {
	case ans.rcode != "NOERROR" && !args.Bool("allow_empty"):
		return step.Result{Failed: true, Data: data, Msg: fmt.Sprintf("%s: the server answered %s", what, ans.rcode)}, nil
	case len(values) == 0 && !args.Bool("allow_empty"):
		return step.Result{Failed: true, Data: data, Msg: fmt.Sprintf("%s: the answer (%s) holds no %s record", what, ans.rcode, qtype)}, nil
	}
	strs := make([]string, len(values))
	for i, v := range values {
		strs[i] = v.(string)
	}
	return step.Result{Data: data, Msg: fmt.Sprintf("%s: %s %s", what, ans.rcode, strings.Join(strs, ", "))}, nil
}

func joinHostPortInt(host string, port int) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + strconv.Itoa(port)
	}
	return host + ":" + strconv.Itoa(port)
}

// dnsExchange sends one query from the host and returns the answer; a nil
// answer with a reason is a try that got nothing (timeout, refused). err is
// for what retrying cannot fix.
func dnsExchange(ctx context.Context, env *step.Env, server string, port int, proto string, query []byte, timeout time.Duration) ([]byte, string, error) {
	payload := query
	if proto == "tcp" {
		payload = binary.BigEndian.AppendUint16(nil, uint16(len(query)))
		payload = append(payload, query...)
	}
	secs := strconv.FormatFloat(max(timeout.Seconds(), 0.1), 'f', -1, 64)
	argv := []string{"timeout", secs, "bash", "-c", dnsScript, "dns_query", server, strconv.Itoa(port), proto, hex.EncodeToString(payload)}
	res, err := env.Target.Run(ctx, transport.Command{Argv: argv, Become: env.Become, Env: env.Environment, Timeout: timeout + 10*time.Second})
	if err != nil {
		return nil, "", err
	}
	stderr := strings.TrimSpace(string(res.Stderr))
	switch res.ExitCode {
	case 0:
	case 124:
		return nil, "no answer within " + timeout.String(), nil
	case 126, 127:
		return nil, "", &missingToolError{fmt.Sprintf("%s: dns_query needs bash and timeout on the host: %s", env.Target.Host(), onhost.LastLines(stderr, 3))}
	default:
		if stderr == "" {
			stderr = fmt.Sprintf("exit status %d", res.ExitCode)
		}
		return nil, onhost.LastLines(stderr, 3), nil
	}
	b, err := hex.DecodeString(strings.Join(strings.Fields(string(res.Stdout)), ""))
	if err != nil {
		return nil, "", fmt.Errorf("%s: dns_query: unexpected output %q", env.Target.Host(), onhost.LastLines(string(res.Stdout), 3))
	}
	if len(b) == 0 {
		if stderr == "" {
			stderr = "empty answer"
		}
		return nil, onhost.LastLines(stderr, 3), nil
	}
	return b, "", nil
}

// dnsQueryMessage is a standard query with recursion desired for one name.
func dnsQueryMessage(id uint16, name string, qtype uint16) ([]byte, error) {
	msg := make([]byte, 12, 64)
	binary.BigEndian.PutUint16(msg[0:], id)
	binary.BigEndian.PutUint16(msg[2:], 0x0100) // RD
	binary.BigEndian.PutUint16(msg[4:], 1)      // QDCOUNT
	name = strings.TrimSuffix(name, ".")
	if name == "" {
		return nil, errors.New("name is empty")
	}
	if len(name) > 253 {
		return nil, fmt.Errorf("name %q is longer than 253 characters", name)
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 {
			return nil, fmt.Errorf("name %q has an empty label or one longer than 63 characters", name)
		}
		msg = append(msg, byte(len(label)))
		msg = append(msg, label...)
	}
	msg = append(msg, 0)
	msg = binary.BigEndian.AppendUint16(msg, qtype)
	msg = binary.BigEndian.AppendUint16(msg, 1) // IN
	return msg, nil
}

// reverseName is the in-addr.arpa or ip6.arpa name of an address.
func reverseName(a netip.Addr) string {
	a = a.Unmap()
	b := a.AsSlice()
	var parts []string
	if a.Is4() {
		for i := len(b) - 1; i >= 0; i-- {
			parts = append(parts, strconv.Itoa(int(b[i])))
		}
		return strings.Join(parts, ".") + ".in-addr.arpa."
	}
	const digits = "0123456789abcdef"
	for i := len(b) - 1; i >= 0; i-- {
		parts = append(parts, string(digits[b[i]&0xf]), string(digits[b[i]>>4]))
	}
	return strings.Join(parts, ".") + ".ip6.arpa."
}

type dnsRecord struct {
	name, typ, data string
	ttl             uint32
}

type dnsAnswer struct {
	rcode         string
	authoritative bool
	records       []dnsRecord
}

// parseDNSAnswer decodes the header and the answer section of a response
// to the query with this id.
func parseDNSAnswer(msg []byte, id uint16) (dnsAnswer, error) {
	var out dnsAnswer
	if len(msg) < 12 {
		return out, fmt.Errorf("%d bytes, shorter than a DNS header", len(msg))
	}
	if got := binary.BigEndian.Uint16(msg[0:]); got != id {
		return out, fmt.Errorf("answer id %d does not match the query's %d", got, id)
	}
	flags := binary.BigEndian.Uint16(msg[2:])
	if flags&0x8000 == 0 {
		return out, errors.New("not a response")
	}
	out.authoritative = flags&0x0400 != 0
	if rc := int(flags & 0xf); rc < len(dnsRcodes) {
		out.rcode = dnsRcodes[rc]
	} else {
		out.rcode = "RCODE" + strconv.Itoa(rc)
	}
	qd, an := int(binary.BigEndian.Uint16(msg[4:])), int(binary.BigEndian.Uint16(msg[6:]))
	off := 12
	for range qd {
		_, n, err := dnsName(msg, off)
		if err != nil {
			return out, fmt.Errorf("question: %w", err)
		}
		off = n + 4
	}
	for i := range an {
		name, n, err := dnsName(msg, off)
		if err != nil {
			return out, fmt.Errorf("answer %d: %w", i+1, err)
		}
		if n+10 > len(msg) {
			return out, fmt.Errorf("answer %d: truncated record", i+1)
		}
		typ := binary.BigEndian.Uint16(msg[n:])
		ttl := binary.BigEndian.Uint32(msg[n+4:])
		rdlen := int(binary.BigEndian.Uint16(msg[n+8:]))
		start := n + 10
		if start+rdlen > len(msg) {
			return out, fmt.Errorf("answer %d: truncated data", i+1)
		}
		data, err := dnsRData(msg, typ, start, rdlen)
		if err != nil {
			return out, fmt.Errorf("answer %d: %w", i+1, err)
		}
		out.records = append(out.records, dnsRecord{name: name, typ: dnsTypeName(typ), ttl: ttl, data: data})
		off = start + rdlen
	}
	return out, nil
}

func dnsTypeName(t uint16) string {
	for k, v := range dnsTypes {
		if v == t {
			return k
		}
	}
	return "TYPE" + strconv.Itoa(int(t))
}

// dnsName reads a possibly compressed name at off and returns it with the
// offset just after it.
func dnsName(msg []byte, off int) (string, int, error) {
	var labels []string
	end := -1
	for jumps := 0; ; {
		if off >= len(msg) {
			return "", 0, errors.New("name runs past the message")
		}
		l := int(msg[off])
		switch {
		case l == 0:
			if end < 0 {
				end = off + 1
			}
			return strings.Join(labels, ".") + ".", end, nil
		case l&0xc0 == 0xc0:
			if off+1 >= len(msg) {
				return "", 0, errors.New("name pointer runs past the message")
			}
			if end < 0 {
				end = off + 2
			}
			if jumps++; jumps > 64 {
				return "", 0, errors.New("name pointers loop")
			}
			off = int(binary.BigEndian.Uint16(msg[off:]) & 0x3fff)
		case l&0xc0 != 0:
			return "", 0, fmt.Errorf("unknown label type %#x", l&0xc0)
		default:
			if off+1+l > len(msg) {
				return "", 0, errors.New("label runs past the message")
			}
			labels = append(labels, string(msg[off+1:off+1+l]))
			off += 1 + l
		}
	}
}

// dnsRData formats a record's data; types not decoded are shown in hex.
func dnsRData(msg []byte, typ uint16, start, n int) (string, error) {
	rd := msg[start : start+n]
	name := func(off int) (string, error) {
		s, _, err := dnsName(msg, off)
		return s, err
	}
	switch typ {
	case dnsTypes["A"], dnsTypes["AAAA"]:
		a, ok := netip.AddrFromSlice(rd)
		if !ok || (typ == dnsTypes["A"]) != (n == 4) {
			return "", fmt.Errorf("address of %d bytes", n)
		}
		return a.String(), nil
	case dnsTypes["CNAME"], dnsTypes["NS"], dnsTypes["PTR"]:
		return name(start)
	case dnsTypes["MX"]:
		if n < 3 {
			return "", errors.New("short MX record")
		}
		host, err := name(start + 2)
		return fmt.Sprintf("%d %s", binary.BigEndian.Uint16(rd), host), err
	case dnsTypes["SRV"]:
		if n < 7 {
			return "", errors.New("short SRV record")
		}
		host, err := name(start + 6)
		return fmt.Sprintf("%d %d %d %s", binary.BigEndian.Uint16(rd), binary.BigEndian.Uint16(rd[2:]), binary.BigEndian.Uint16(rd[4:]), host), err
	case dnsTypes["TXT"]:
		var parts []string
		for i := 0; i < len(rd); {
			l := int(rd[i])
			if i+1+l > len(rd) {
				return "", errors.New("TXT string runs past the record")
			}
			parts = append(parts, string(rd[i+1:i+1+l]))
			i += 1 + l
		}
		return strings.Join(parts, ""), nil
	case dnsTypes["SOA"]:
		mname, next, err := dnsName(msg, start)
		if err != nil {
			return "", err
		}
		rname, next, err := dnsName(msg, next)
		if err != nil {
			return "", err
		}
		if next+20 > start+n {
			return "", errors.New("short SOA record")
		}
		var nums []string
		for i := range 5 {
			nums = append(nums, strconv.FormatUint(uint64(binary.BigEndian.Uint32(msg[next+4*i:])), 10))
		}
		return mname + " " + rname + " " + strings.Join(nums, " "), nil
	}
	return hex.EncodeToString(rd), nil
}

// dnsTypeNames lists the supported types, for messages.
func dnsTypeNames() []string {
	names := make([]string, 0, len(dnsTypes))
	for k := range dnsTypes {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}
