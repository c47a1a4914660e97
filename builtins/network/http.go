package network

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/builtins/onhost"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
)

func tlsArgs() []step.Arg {
	return []step.Arg{
		{Name: "ca_path", Type: step.String, Aliases: []string{"ca"}, Doc: "CA bundle on the host to verify the server with."},
		{Name: "client_cert", Type: step.String, Aliases: []string{"cert"}, Doc: "Client certificate on the host (PEM), for mutual TLS such as etcd or the API server."},
		{Name: "client_key", Type: step.String, Aliases: []string{"key"}, Doc: "Client key on the host (PEM)."},
		{Name: "validate_certs", Type: step.Bool, Default: true, Doc: "false skips server certificate verification."},
	}
}

// curlArgv builds the TLS and URL part of a curl command run on the host;
// curl is used so certificate paths and addresses are the host's own.
func curlArgv(args step.Args, maxTime time.Duration) []string {
	argv := []string{"curl", "-sS", "--max-time", strconv.Itoa(max(int(maxTime.Seconds()), 1))}
	if !args.Bool("validate_certs") {
		argv = append(argv, "-k")
	}
	if p := args.String("ca_path"); p != "" {
		argv = append(argv, "--cacert", p)
	}
	if p := args.String("client_cert"); p != "" {
		argv = append(argv, "--cert", p)
	}
	if p := args.String("client_key"); p != "" {
		argv = append(argv, "--key", p)
	}
	return argv
}

// missingToolError is a probe failure that waiting cannot fix.
type missingToolError struct{ msg string }

func (e *missingToolError) Error() string { return e.msg }

func curlMissing(env *step.Env, res transport.Result) error {
	if res.ExitCode == 127 {
		return &missingToolError{fmt.Sprintf("%s: curl is not installed on the host (it is needed for HTTP checks)", env.Target.Host())}
	}
	return nil
}

type uriBuiltin struct{}

func (uriBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "uri",
		Summary: "Make an HTTP(S) request from the host, optionally with TLS client certificates.",
		Doc: "The request is made by `curl` on the host, so addresses such as 127.0.0.1 and certificate paths are the " +
			"host's. Headers and the body reach curl on its standard input (a config read with `-K -`), never on " +
			"its command line, which every user of the host can read. The result holds `status`, `content_type`, `content` (with return_content, or when JSON) and `json` " +
			"(the decoded body when the response is JSON). A status not in `status_code` fails the task. GET and HEAD " +
			"run in check mode (they change nothing); other methods are skipped. The task never reports changed by " +
			"itself: use `changed_when` for requests that change something.",
		Args: append([]step.Arg{
			{Name: "url", Type: step.String, Required: true, Doc: "http:// or https:// URL."},
			{Name: "method", Type: step.String, Default: "GET", Doc: "HTTP method."},
			{Name: "body", Type: step.Any, Doc: "Request body; a map or list is sent as JSON with body_format: json."},
			{Name: "body_format", Type: step.String, Default: "raw", Choices: []string{"raw", "json"}, Doc: "json encodes body and sets Content-Type: application/json."},
			{Name: "headers", Type: step.Map, Doc: "Request headers."},
			{Name: "status_code", Type: step.List, Default: []any{200}, Doc: "Accepted status codes."},
			{Name: "return_content", Type: step.Bool, Default: false, Doc: "Put the body in `content`."},
			{Name: "timeout", Type: step.Duration, Default: "30s", Doc: "Limit for the whole request."},
			{Name: "follow_redirects", Type: step.Bool, Default: false, Doc: "Follow 3xx redirects (release sites such as GitHub answer with them); `status` is then the final response's."},
		}, tlsArgs()...),
		Examples: []string{"uri:\n  url: https://127.0.0.1:2379/health\n  ca_path: /etc/ssl/etcd/ca.pem\n  client_cert: /etc/ssl/etcd/admin.pem\n  client_key: /etc/ssl/etcd/admin-key.pem\nregister: health"},
	}
}

func (uriBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	u := args.String("url")
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return step.Result{}, fmt.Errorf("uri: %q is not an http(s) URL", u)
	}
	method := strings.ToUpper(args.String("method"))
	data := map[string]any{"url": u}
	if env.Check && method != "GET" && method != "HEAD" {
		return step.Result{Skipped: true, Msg: "skipped in check mode: " + method + " " + u, Data: data}, nil
	}
	timeout := args.Duration("timeout")
	argv := append(curlArgv(args, timeout), "-w", "\n%{http_code} %{content_type}")
	if args.Bool("follow_redirects") {
		argv = append(argv, "-L")
	}
	if method == "HEAD" {
		// -X HEAD would make curl wait for a body that never comes.
		argv = append(argv, "-I")
	} else {
		argv = append(argv, "-X", method)
	}
	// Headers (tokens, passwords) and the body go to curl as a config on
	// stdin (-K -), never on its command line, which every user of the host
	// can read in ps.
	hdrs := args.Map("headers")
	var cfg strings.Builder
	if args.Has("body") {
		var body string
		if args.String("body_format") == "json" {
			b, err := json.Marshal(args["body"])
			if err != nil {
				return step.Result{}, fmt.Errorf("uri: body: %w", err)
			}
			body = string(b)
			if _, ok := hdrs["Content-Type"]; !ok {
				cfg.WriteString("header = \"Content-Type: application/json\"\n")
			}
		} else {
			switch args["body"].(type) {
			case map[string]any, []any:
				return step.Result{}, fmt.Errorf("uri: body is a map or list; add body_format: json to send it as JSON")
			}
			body = args.String("body")
		}
		if strings.IndexByte(body, 0) >= 0 {
			return step.Result{}, fmt.Errorf("uri: body holds a NUL byte, which curl cannot be given")
		}
		cfg.WriteString("data-raw = " + curlConfigQuote(body) + "\n")
	}
	for _, k := range sortedKeys(hdrs) {
		h := k + ": " + fmt.Sprint(hdrs[k])
		if strings.ContainsAny(h, "\r\n\x00") {
			return step.Result{}, fmt.Errorf("uri: header %s holds a line break or NUL byte", k)
		}
		cfg.WriteString("header = " + curlConfigQuote(h) + "\n")
	}
	argv = append(argv, "-K", "-", "--", u)
	res, err := env.Target.Run(ctx, transport.Command{Argv: argv, Stdin: strings.NewReader(cfg.String()), Become: env.Become, Timeout: timeout + 5*time.Second})
	if err != nil {
		return step.Result{}, err
	}
	if err := curlMissing(env, res); err != nil {
		return step.Result{}, err
	}
	if res.ExitCode != 0 {
		return step.Result{Failed: true, Msg: fmt.Sprintf("%s %s: %s", method, u, strings.TrimSpace(string(res.Stderr))), Data: data}, nil
	}
	out := string(res.Stdout)
	i := strings.LastIndexByte(out, '\n')
	if i < 0 {
		return step.Result{}, fmt.Errorf("%s: uri: unexpected curl output %q", env.Target.Host(), out)
	}
	content, tail := out[:i], strings.Fields(out[i+1:])
	status, _ := strconv.Atoi(tail[0])
	ctype := ""
	if len(tail) > 1 {
		ctype = tail[1]
	}
	data["status"] = status
	data["content_type"] = ctype
	if args.Bool("return_content") {
		data["content"] = content
	}
	if strings.Contains(ctype, "json") && content != "" {
		var v any
		if err := json.Unmarshal([]byte(content), &v); err == nil {
			data["json"] = v
			data["content"] = content
		}
	}
	want := args.List("status_code")
	var codes []int
	for _, w := range want {
		n, err := step.ToInt(w)
		if err != nil {
			return step.Result{}, fmt.Errorf("uri: status_code: %w", err)
		}
		codes = append(codes, n)
	}
	if !slices.Contains(codes, status) {
		snippet := content
		if len(snippet) > 500 {
			snippet = snippet[:500] + "..."
		}
		return step.Result{Failed: true, Msg: fmt.Sprintf("%s %s: status %d, want %v: %s", method, u, status, codes, strings.TrimSpace(snippet)), Data: data}, nil
	}
	return step.Result{Data: data}, nil
}

// curlConfigQuote writes s as a double-quoted string of a curl config file,
// where backslash escapes ", \\, and the control characters \t \n \r \v.
func curlConfigQuote(s string) string {
	r := strings.NewReplacer("\\", "\\\\", "\"", "\\\"", "\t", "\\t", "\n", "\\n", "\r", "\\r", "\v", "\\v")
	return "\"" + r.Replace(s) + "\""
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

type waitForBuiltin struct {
	// firstPoll is the first pause between tries; it doubles up to sleep.
	firstPoll time.Duration
}

func (waitForBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "wait_for",
		Summary: "Wait until a TCP port, a path, an HTTP(S) URL or a command reaches a state on the host.",
		Doc: "Exactly one of `port`, `path`, `url` or `command` says what to wait for. The probe runs on the host " +
			"(TCP with nc or bash, HTTP with curl; on the control machine TCP is dialed by kubexm itself, with no tool). It is retried with a short pause that doubles up to `sleep`, " +
			"until `timeout`; then the task fails with the last probe error. `started`/`present` wait for the " +
			"port to accept, the path to exist, the URL to answer with `status`, the command to succeed; " +
			"`stopped`/`absent` wait for the opposite. Registers `met` (whether the state was reached: false with a " +
			"`failed_when: false` that lets a timeout through) and `elapsed`. Skipped in check mode; it never reports changed.",
		Args: append([]step.Arg{
			{Name: "host", Type: step.String, Default: "127.0.0.1", Doc: "Address to connect to (port), as seen from the host."},
			{Name: "port", Type: step.Int, Doc: "TCP port."},
			{Name: "connect_timeout", Type: step.Duration, Default: "2s", Doc: "port: how long one probe waits for the connection, and with search_regex for what the service sends; " +
				"with `timeout: 0s` the port is probed once."},
			{Name: "search_regex", Type: step.String, Doc: "port: the service counts as up only when what it sends first (read for up to connect_timeout, at most 64 KiB) " +
				"matches this regular expression (Go syntax), e.g. `^SSH-` for an SSH server: a proxy on the way that accepts any " +
				"connection does not. Needs bash on the host, unless the host is the control machine."},
			{Name: "path", Type: step.String, Doc: "File or directory on the host."},
			{Name: "url", Type: step.String, Doc: "http(s) URL, probed with curl on the host."},
			{Name: "status", Type: step.List, Default: []any{200}, Doc: "Status codes that count as up for url."},
			{Name: "command", Type: step.String, Doc: "Shell command whose success counts as up."},
			{Name: "state", Type: step.String, Default: "started", Choices: []string{"started", "stopped", "present", "absent"}, Doc: "What to wait for."},
			{Name: "timeout", Type: step.Duration, Default: "300s", Doc: "Give up after this long."},
			{Name: "sleep", Type: step.Duration, Default: "2s", Doc: "Longest pause between tries."},
			{Name: "delay", Type: step.Duration, Default: 0, Doc: "Wait this long before the first try."},
			{Name: "unit", Type: step.String, Doc: "The systemd unit that serves what is waited for. While it is not up, a unit that " +
				"has failed (and that systemd will not restart) ends the wait at once; a failure's message adds the unit's state, " +
				"its restarts and its last journal lines."},
		}, tlsArgs()...),
		Examples: []string{"wait_for:\n  port: 6443\n  timeout: 5m",
			"wait_for:\n  url: http://127.0.0.1:10256/livez\n  unit: kube-proxy",
			"wait_for:\n  url: https://127.0.0.1:6443/healthz\n  ca_path: /etc/kubernetes/pki/ca.crt\n  validate_certs: true"},
	}
}

func (w waitForBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	var kinds []string
	for _, k := range []string{"port", "path", "url", "command"} {
		if args.Has(k) {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) != 1 {
		return step.Result{}, fmt.Errorf("wait_for: give exactly one of port, path, url, command (got %v)", kinds)
	}
	kind := kinds[0]
	state := args.String("state")
	if state == "" {
		state = "started"
	}
	if err := onhost.CheckChoice("state", state, "started", "stopped", "present", "absent"); err != nil {
		return step.Result{}, fmt.Errorf("wait_for: %w", err)
	}
	wantUp := state == "started" || state == "present"
	host := args.String("host")
	var banner *regexp.Regexp
	if re := args.String("search_regex"); re != "" {
		if kind != "port" {
			return step.Result{}, fmt.Errorf("wait_for: search_regex is for port (got %s)", kind)
		}
		var err error
		if banner, err = regexp.Compile(re); err != nil {
			return step.Result{}, fmt.Errorf("wait_for: search_regex: %w", err)
		}
	}
	var what string
	var probe func() (bool, error)
	switch kind {
	case "port":
		port := args.Int("port")
		if port <= 0 || port > 65535 {
			return step.Result{}, fmt.Errorf("wait_for: port %d is out of range", port)
		}
		what = fmt.Sprintf("%s:%d", host, port)
		wait := args.Duration("connect_timeout")
		if wait <= 0 {
			return step.Result{}, fmt.Errorf("wait_for: connect_timeout %s is not positive", wait)
		}
		probe = func() (bool, error) { return tcpProbe(ctx, env, host, port, banner, wait) }
	case "path":
		what = args.String("path")
		probe = func() (bool, error) {
			fi, err := env.Target.Stat(ctx, what, env.Become)
			return fi.Exists, err
		}
	case "url":
		what = args.String("url")
		var codes []int
		for _, s := range args.List("status") {
			n, err := step.ToInt(s)
			if err != nil {
				return step.Result{}, fmt.Errorf("wait_for: status: %w", err)
			}
			codes = append(codes, n)
		}
		probe = func() (bool, error) { return urlProbe(ctx, env, args, what, codes) }
	case "command":
		what = args.String("command")
		probe = func() (bool, error) {
			res, err := env.Target.Run(ctx, transport.Command{Script: what, Become: env.Become, Timeout: 30 * time.Second})
			if err != nil {
				return false, err
			}
			if res.ExitCode != 0 {
				return false, fmt.Errorf("rc %d: %s", res.ExitCode, onhost.LastLines(strings.TrimSpace(string(res.Stderr)), 3))
			}
			return true, nil
		}
	}
	data := map[string]any{kind: what, "state": state}
	unit := args.String("unit")
	if unit != "" {
		data["unit"] = unit
	}
	if env.Check {
		return step.Result{Skipped: true, Msg: "skipped in check mode: wait for " + what, Data: data}, nil
	}
	timeout := args.Duration("timeout")
	maxSleep := args.Duration("sleep")
	if maxSleep <= 0 {
		return step.Result{}, fmt.Errorf("wait_for: sleep %s is not positive", maxSleep)
	}
	pause := w.firstPoll
	if pause <= 0 {
		pause = 250 * time.Millisecond
	}
	start := time.Now()
	if err := onhost.Sleep(ctx, args.Duration("delay")); err != nil {
		return step.Result{}, err
	}
	deadline := start.Add(timeout)
	var lastErr error
	var unitSeen time.Time
	unitEvery := 5 * w.firstPoll
	if w.firstPoll <= 0 {
		unitEvery = 5 * time.Second
	}
	for tries := 1; ; tries++ {
		up, err := probe()
		if ctx.Err() != nil {
			return step.Result{}, ctx.Err()
		}
		// A probe error means "not up" (connection refused, 503, ...), except
		// for a missing tool, which waiting cannot fix.
		var missing *missingToolError
		if errors.As(err, &missing) {
			return step.Result{}, err
		}
		if up == wantUp {
			data["met"] = true
			data["elapsed"] = time.Since(start).Seconds()
			data["tries"] = tries
			return step.Result{Data: data}, nil
		}
		lastErr = err
		// Waiting cannot help a unit that systemd gave up on; looked at
		// now and then, not at every probe.
		if unit != "" && wantUp && time.Since(unitSeen) >= unitEvery {
			unitSeen = time.Now()
			if u := unitStatus(ctx, env, unit); u.failed() {
				data["met"] = false
				data["elapsed"] = time.Since(start).Seconds()
				msg := fmt.Sprintf("gave up after %s waiting for %s %s to be %s: unit %s has failed", time.Since(start).Round(time.Second), kind, what, state, unit)
				if err != nil {
					msg += " (last probe: " + err.Error() + ")"
				}
				return step.Result{Failed: true, Msg: msg + u.String(), Data: data}, nil
			}
		}
		if time.Now().Add(pause).After(deadline) {
			break
		}
		if err := onhost.Sleep(ctx, pause); err != nil {
			return step.Result{}, err
		}
		pause = min(pause*2, maxSleep)
	}
	msg := fmt.Sprintf("timed out after %s waiting for %s %s to be %s", timeout, kind, what, state)
	if lastErr != nil && wantUp {
		msg += ": " + lastErr.Error()
	}
	if unit != "" {
		msg += unitStatus(ctx, env, unit).String()
	}
	data["met"] = false
	data["elapsed"] = time.Since(start).Seconds()
	return step.Result{Failed: true, Msg: msg, Data: data}, nil
}

// unitState is what systemd says of a unit, for wait_for's messages.
type unitState struct {
	name                 string
	active, sub          string
	restarts, exitStatus string
	journal              string // the last lines of its journal
	err                  error  // why the state could not be read
}

// unitStatus reads a unit's state and the last lines of its journal on the
// host: the last lines its own processes wrote (_SYSTEMD_UNIT), where a
// crashing program says why, rather than systemd's start and stop lines
// about it, which fill the unit's journal (-u) between two restarts; -u
// when the program wrote nothing (a unit that never started).
func unitStatus(ctx context.Context, env *step.Env, unit string) unitState {
	u := unitState{name: unit}
	res, err := env.Target.Run(ctx, transport.Command{Argv: []string{"/bin/sh", "-c",
		`systemctl show -p ActiveState,SubState,NRestarts,ExecMainStatus -- "$1" || exit
echo ---
full=$1
case "$full" in *.*) ;; *) full=$full.service ;; esac
own=$(journalctl _SYSTEMD_UNIT="$full" -n 5 --no-pager -o cat 2>/dev/null)
if [ -n "$own" ]; then printf '%s\n' "$own"; else journalctl -u "$1" -n 5 --no-pager -o cat 2>/dev/null || true; fi`, "sh", unit}, Become: env.Become, Timeout: 15 * time.Second})
	switch {
	case err != nil:
		u.err = err
		return u
	case res.ExitCode != 0:
		u.err = fmt.Errorf("systemctl show: rc %d: %s", res.ExitCode, onhost.FirstLine(strings.TrimSpace(string(res.Stderr))))
		return u
	}
	props, journal, _ := strings.Cut(string(res.Stdout), "---\n")
	for _, line := range strings.Split(props, "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "ActiveState":
			u.active = v
		case "SubState":
			u.sub = v
		case "NRestarts":
			u.restarts = v
		case "ExecMainStatus":
			u.exitStatus = v
		}
	}
	lines := onhost.SplitLines([]byte(strings.TrimSpace(journal)))
	for i, l := range lines {
		// klog lines can carry whole objects.
		if len(l) > 400 {
			lines[i] = l[:400] + "..."
		}
	}
	u.journal = strings.Join(lines, "\n")
	return u
}

// failed: systemd has given up on the unit; it stays down unless someone
// starts it.
func (u unitState) failed() bool { return u.err == nil && u.active == "failed" }

// String is the unit's part of a message: "; unit kube-proxy: activating
// (auto-restart), 12 restarts, last exit status 1; its journal ends: ...".
func (u unitState) String() string {
	if u.err != nil {
		return fmt.Sprintf("; unit %s: state unknown: %v", u.name, u.err)
	}
	s := fmt.Sprintf("; unit %s: %s (%s)", u.name, u.active, u.sub)
	if u.restarts != "" && u.restarts != "0" {
		s += ", " + u.restarts + " restarts"
	}
	if u.exitStatus != "" && u.exitStatus != "0" {
		s += ", last exit status " + u.exitStatus
	}
	if u.journal != "" {
		s += "; its journal ends:\n" + u.journal
	}
	return s
}

// directDialer is the control machine's transport, which connects from
// kubexm's own process (InProcess, the mark the file builtins read too) and
// so needs no tool (the in-cluster controller's image has none); a Dialer
// through SSH would also need the server to allow forwarding, so the hosts
// keep the command.
type directDialer interface {
	transport.Dialer
	InProcess(become bool) bool
}

// bannerMax is the most of what a service sends first that a probe reads.
const bannerMax = 64 << 10

// tcpProbe connects from the host with nc, or bash's /dev/tcp (bash alone
// when banner asks to read what the service sends first), or from kubexm
// itself on the control machine; wait bounds the connection, then what the
// service sends first.
func tcpProbe(ctx context.Context, env *step.Env, host string, port int, banner *regexp.Regexp, wait time.Duration) (bool, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	if d, ok := env.Target.(directDialer); ok && d.InProcess(false) {
		return dialProbe(ctx, d, addr, banner, wait)
	}
	secs := strconv.Itoa(max(int(wait.Round(time.Second).Seconds()), 1))
	script := `
if command -v nc >/dev/null 2>&1; then exec nc -z -w "$3" "$1" "$2"; fi
if command -v bash >/dev/null 2>&1 && command -v timeout >/dev/null 2>&1; then exec timeout "$3" bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2"; fi
exit 127`
	if banner != nil {
		// dd returns after the first read: what the service sent first.
		script = `
{ command -v bash && command -v timeout; } >/dev/null 2>&1 || exit 127
exec timeout "$3" bash -c 'exec 3<>"/dev/tcp/$0/$1" || exit 1; exec dd bs=65536 count=1 status=none <&3' "$1" "$2"`
	}
	res, err := env.Target.Run(ctx, transport.Command{Argv: []string{"/bin/sh", "-c", script, "sh", host, strconv.Itoa(port), secs}, Timeout: wait + 5*time.Second})
	if err != nil {
		// The probe's own timeout means the port did not answer.
		if ctx.Err() == nil {
			return false, fmt.Errorf("connect %s: no answer", addr)
		}
		return false, err
	}
	switch res.ExitCode {
	case 0:
		if banner != nil {
			return bannerMatch(addr, res.Stdout, banner)
		}
		return true, nil
	case 124:
		if banner == nil {
			return false, fmt.Errorf("connect %s: no answer within %s", addr, wait)
		}
		return false, fmt.Errorf("connect %s: nothing received within %s (want %s)", addr, wait, banner)
	case 127:
		need := "neither nc nor bash with timeout(1) is"
		if banner != nil {
			need = "bash or timeout(1) is not"
		}
		return false, &missingToolError{fmt.Sprintf("%s: %s installed on the host (needed to probe a port)", env.Target.Host(), need)}
	}
	why := onhost.FirstLine(strings.TrimSpace(string(res.Stderr)))
	if why == "" {
		why = "refused"
	}
	return false, fmt.Errorf("connect %s: %s", addr, why)
}

// dialProbe is tcpProbe from kubexm's own process.
func dialProbe(ctx context.Context, d transport.Dialer, addr string, banner *regexp.Regexp, wait time.Duration) (bool, error) {
	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	conn, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return false, fmt.Errorf("connect %s: %w", addr, err)
	}
	defer conn.Close()
	if banner == nil {
		return true, nil
	}
	if err := conn.SetReadDeadline(start.Add(wait)); err != nil {
		return false, err
	}
	buf := make([]byte, 0, 4096)
	for len(buf) < bannerMax {
		n, err := conn.Read(buf[len(buf):min(cap(buf), bannerMax)])
		buf = buf[:len(buf)+n]
		if banner.Match(buf) {
			return true, nil
		}
		if err != nil {
			if len(buf) == 0 {
				return false, fmt.Errorf("connect %s: nothing received within %s (want %s)", addr, wait, banner)
			}
			break
		}
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, len(buf))
		}
	}
	return bannerMatch(addr, buf, banner)
}

func bannerMatch(addr string, got []byte, banner *regexp.Regexp) (bool, error) {
	if banner.Match(got) {
		return true, nil
	}
	return false, fmt.Errorf("connect %s: what it sent does not match %s: %q", addr, banner, string(got[:min(len(got), 64)]))
}

func urlProbe(ctx context.Context, env *step.Env, args step.Args, u string, codes []int) (bool, error) {
	argv := append(curlArgv(args, 5*time.Second), "-o", "/dev/null", "-w", "%{http_code}", "--", u)
	res, err := env.Target.Run(ctx, transport.Command{Argv: argv, Become: env.Become, Timeout: 10 * time.Second})
	if err != nil {
		return false, err
	}
	if err := curlMissing(env, res); err != nil {
		return false, err
	}
	if res.ExitCode != 0 {
		return false, fmt.Errorf("%s", strings.TrimSpace(string(res.Stderr)))
	}
	status, _ := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if !slices.Contains(codes, status) {
		return false, fmt.Errorf("status %d, want %v", status, codes)
	}
	return true, nil
}
