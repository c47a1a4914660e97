package transport

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"time"
)

// BecomeError is a failure of sudo itself, before the command ran.
type BecomeError struct {
	Host   string
	User   string // the user that asked sudo
	Msg    string
	Output string // what sudo printed
}

func (e *BecomeError) Error() string {
	msg := fmt.Sprintf("host %s: become: %s", e.Host, e.Msg)
	if e.Output != "" {
		msg += ": " + e.Output
	}
	return msg + fmt.Sprintf("\n  hint: sudo failed; make sure user %s may use sudo (NOPASSWD, or set sudoPassword or password for the host in cluster.yaml)", e.User)
}

// BecomeHeader is the stderr writer of a command wrapped to run through
// sudo: the wrapper announces the command's PID after a marker. Until that
// line arrives everything is sudo's (prompts, lecture, errors) and is kept
// out of the output; after it the bytes are the command's own stderr.
type BecomeHeader struct {
	marker, prompt []byte
	out            io.Writer

	mu       sync.Mutex
	buf      []byte
	pre      []byte
	done     bool
	prompts  int
	started  chan int
	prompted chan int
}

// NewBecomeHeader watches for sudo's prompt and the PID marker, and writes
// the command's stderr to out.
func NewBecomeHeader(marker, prompt string, out io.Writer) *BecomeHeader {
	return &BecomeHeader{marker: []byte(marker), prompt: []byte(prompt), out: out,
		started: make(chan int, 1), prompted: make(chan int, 4)}
}

// Started delivers the command's PID once, when it has started.
func (h *BecomeHeader) Started() <-chan int { return h.started }

// Prompted delivers the count of sudo's password prompts so far.
func (h *BecomeHeader) Prompted() <-chan int { return h.prompted }

func (h *BecomeHeader) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return h.out.Write(p)
	}
	h.buf = append(h.buf, p...)
	for {
		if i := bytes.Index(h.buf, h.prompt); i >= 0 {
			h.pre = append(h.pre, h.buf[:i]...)
			h.buf = append(h.buf[:0:0], h.buf[i+len(h.prompt):]...)
			h.prompts++
			select {
			case h.prompted <- h.prompts:
			default:
			}
			continue
		}
		i := bytes.Index(h.buf, h.marker)
		if i < 0 {
			break
		}
		nl := bytes.IndexByte(h.buf[i:], '\n')
		if nl < 0 {
			break
		}
		pid, _ := strconv.Atoi(string(h.buf[i+len(h.marker) : i+nl]))
		h.pre = append(h.pre, h.buf[:i]...)
		rest := h.buf[i+nl+1:]
		h.buf = nil
		h.done = true
		h.started <- pid
		if len(rest) > 0 {
			h.out.Write(rest)
		}
		return len(p), nil
	}
	return len(p), nil
}

// IsStarted reports whether the command's PID line has arrived.
func (h *BecomeHeader) IsStarted() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.done
}

// Preamble is what came before the command started (sudo's messages).
func (h *BecomeHeader) Preamble() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.TrimSpace(string(h.pre) + string(h.buf))
}

// ForwardStdin copies src (nil: nothing) to the started command's stdin,
// then calls closeStdin. When reading src fails, stdin stays open and the
// error goes to failed, so that the caller kills the command: a clean EOF
// would let it act on truncated input.
func ForwardStdin(ctx context.Context, src io.Reader, stdin io.Writer, closeStdin func(), failed chan<- error) {
	if src != nil {
		r := &readErr{r: ContextReader(ctx, src)}
		io.Copy(stdin, r)
		if r.err != nil {
			failed <- r.err
			return
		}
	}
	closeStdin()
}

// readErr remembers its reader's failure, which io.Copy would not tell
// apart from a failure to write.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}

// ShellQuote returns s as one POSIX shell word.
func ShellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// UnixMode converts permission and special bits to their chmod(2) value.
func UnixMode(m fs.FileMode) uint32 {
	v := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		v |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		v |= 0o1000
	}
	return v
}

// AtomicWriteCommand is a command, run through become, that streams src into
// a temporary file beside dst, sets its mode and owner and renames it into
// place, so readers never see a partly written file. It is how a transport
// writes files its login user may not write.
func AtomicWriteCommand(src io.Reader, dst string, mode fs.FileMode, owner, group string) Command {
	return AtomicWriteThen(src, dst, mode, owner, group, "", "")
}

// AtomicWriteThen is AtomicWriteCommand whose script defines funcs (shell
// functions) first and runs then right after the rename, with dst as $1
// and args as $4, $5 and on: what a caller does to the file it has just put
// in place, in the same command.
func AtomicWriteThen(src io.Reader, dst string, mode fs.FileMode, owner, group, funcs, then string, args ...string) Command {
	const script = `set -e
d=$(dirname -- "$1"); b=$(basename -- "$1")
mkdir -p -- "$d"
tmp=$(mktemp "$d/.$b.kubexm-XXXXXX")
trap 'rm -f -- "$tmp"' EXIT
cat > "$tmp"
chmod "$2" "$tmp"
if [ -n "$3" ]; then chown -- "$3" "$tmp"; fi
mv -f -- "$tmp" "$1"
trap - EXIT`
	spec := owner
	if group != "" {
		spec += ":" + group
	}
	argv := []string{"/bin/sh", "-c", funcs + script + "\n" + then, "sh", dst, fmt.Sprintf("%04o", UnixMode(mode)), spec}
	return Command{Argv: append(argv, args...), Stdin: src, Become: true}
}

// KillGrace is how long a cancelled command gets between SIGTERM and SIGKILL.
const KillGrace = 3 * time.Second

// KillGroupScript is a shell script that stops the process group of pid:
// SIGTERM, then SIGKILL after grace. The group is looked up when it runs,
// since a command started through sudo may sit in sudo's group or in a
// session sudo created. (dash's kill takes no "--".)
func KillGroupScript(pid int, grace time.Duration) string {
	return fmt.Sprintf(`p=%d
s=$(cat /proc/$p/stat 2>/dev/null) || exit 0
s=${s##*) }; set -- $s; g=$3
kill -TERM -$g 2>/dev/null || kill -TERM $p 2>/dev/null
i=0
while kill -0 -$g 2>/dev/null; do
  [ $i -ge %d ] && { kill -KILL -$g 2>/dev/null; exit 0; }
  sleep 0.1 2>/dev/null || sleep 1; i=$((i+1))
done
exit 0`, pid, int(grace/(100*time.Millisecond)))
}
