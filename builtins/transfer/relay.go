package transfer

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"strconv"
	"sync"
	"time"

	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
)

// Host-to-host distribution. The hosts of a distribute task that lack a
// large file get it, where they can, from a host that already has it
// (checksum verified) instead of from the control machine: the control
// machine uploads a file at most relaySeeds times, every host that holds
// the file serves it to up to relayFanout hosts at once, so the number of
// holders roughly triples per transfer time: the control machine's uplink
// is O(1) in hosts and the wall time O(log hosts).
//
// A transfer from host A to host B is two commands over the existing SSH
// connections: on A, systemd-socket-activate listens on A's internal
// address on a random port and, per connection, sends the file to a client
// that first sends a one-time token (given to both through the environment,
// never on a command line); on B, bash connects to A (/dev/tcp), receives
// into a temporary file beside dest, and renames it into place only when
// its sha256 is the one the control machine computed. So no host gets
// unverified bytes. A host that cannot reach its source, or lacks those
// tools, or receives a wrong sum, tries another source, then falls back to
// a direct upload.

const (
	relaySeeds    = 2 // direct uploads of one file per run, before fallbacks
	relayFanout   = 2 // transfers one holder serves at once
	relayAttempts = 2 // peer sources a host tries before a direct upload
	// relayMinSize: smaller files go directly; a transfer's two commands
	// cost more than the upload saves.
	relayMinSize = 8 << 20
)

// relays coordinates host-to-host transfers for one run: per file content
// (sha256), the hosts that hold it and how busy they are.
type relays struct {
	mu    sync.Mutex
	files map[string]*swarm
}

// swarm is one file's holders and the hosts waiting for a source.
type swarm struct {
	holders   []*holder
	uploads   int           // direct uploads started
	receiving int           // hosts receiving now, holders soon
	changed   chan struct{} // closed and replaced when a source may be free
}

// holder is a host that has the verified file at path.
type holder struct {
	host, addr, path string
	t                transport.Transport
	become           bool
	serving          int
	broken           bool // a transfer from it failed: not used again
}

// source is what a waiting host got: a holder, or (nil) a direct upload.
type source struct{ h *holder }

func (r *relays) swarm(sum string) *swarm {
	if r.files == nil {
		r.files = map[string]*swarm{}
	}
	s := r.files[sum]
	if s == nil {
		s = &swarm{changed: make(chan struct{})}
		r.files[sum] = s
	}
	return s
}

func (s *swarm) wake() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// acquire waits for a source for host: a holder with a free slot that this
// host has not tried; else a direct upload while fewer than relaySeeds have
// been made, or when no holder is left to try and no transfer under way
// will make one, or after relayAttempts failed holders.
func (r *relays) acquire(ctx context.Context, sum, host string, tried map[*holder]bool, direct bool) (source, error) {
	for {
		r.mu.Lock()
		s := r.swarm(sum)
		var best *holder
		usable := false
		for _, h := range s.holders {
			if h.broken || tried[h] || h.host == host {
				continue
			}
			usable = true
			if h.serving < relayFanout && (best == nil || h.serving < best.serving) {
				best = h
			}
		}
		switch {
		case !direct && len(tried) < relayAttempts && best != nil:
			best.serving++
			s.receiving++
			r.mu.Unlock()
			return source{best}, nil
		case direct || len(tried) >= relayAttempts || s.uploads < relaySeeds || (!usable && s.receiving == 0):
			s.uploads++
			s.receiving++
			r.mu.Unlock()
			return source{}, nil
		}
		wait := s.changed
		r.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return source{}, ctx.Err()
		}
	}
}

// finish ends a transfer from src: its slot is free, a holder to blame is
// not used again, and me (when set) now holds the file.
func (r *relays) finish(sum string, src source, holderFault bool, me *holder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.swarm(sum)
	s.receiving--
	if src.h != nil {
		src.h.serving--
		src.h.broken = src.h.broken || holderFault
	}
	if me != nil {
		s.addHolder(me)
	}
	s.wake()
}

// hold records that a host already had the verified file.
func (r *relays) hold(sum string, h *holder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.swarm(sum)
	s.addHolder(h)
	s.wake()
}

func (s *swarm) addHolder(h *holder) {
	if h.addr == "" {
		return // others cannot reach it
	}
	for _, o := range s.holders {
		if o.host == h.host && o.path == h.path {
			return
		}
	}
	s.holders = append(s.holders, h)
}

// relayServe runs on the holder: listen on addr:port, and per connection
// send a line KUBEXM-RELAY and the file to a client whose first line is the
// token.
const relayServe = `exec systemd-socket-activate -l "$1:$2" -a --inetd -E KUBEXM_RELAY_TOKEN /bin/sh -c 'read -r t && [ "$t" = "$KUBEXM_RELAY_TOKEN" ] && echo KUBEXM-RELAY && exec cat -- "$0"' "$3"`

// relayFetch runs on the receiver: wait up to 5 s for the listener,
// expect the sender's KUBEXM-RELAY within 5 s (something else may accept
// connections at that address: a proxy, another service), receive into the
// temporary file $7 beside dest $3, and keep it only when its sha256 is $4,
// with mode $5 and owner $6 (user[:group], may be empty); fetchFrom renames
// it into place. Exit 20: the source cannot be reached; 21: wrong sum.
const relayFetch = transport.SHA256Func + `set -u
dest=$3; tmp=$7
mkdir -p -- "$(dirname -- "$dest")" || exit 1
end=$(($(date +%s) + 5))
until timeout 1 bash -c 'exec 3<>"/dev/tcp/$1/$2"' sh "$1" "$2" 2>/dev/null; do
  [ "$(date +%s)" -lt "$end" ] || exit 20
  sleep 0.1
done
trap 'rm -f -- "$tmp"' EXIT
bash -c 'exec 3<>"/dev/tcp/$1/$2" || exit 20
printf "%s\n" "$KUBEXM_RELAY_TOKEN" >&3
IFS= read -r -t 5 hello <&3 && [ "$hello" = KUBEXM-RELAY ] || exit 20
exec cat <&3' sh "$1" "$2" > "$tmp" || exit 20
sum=$(kxsha256 "$tmp") || exit 1
[ "${sum%% *}" = "$4" ] || exit 21
chmod "$5" -- "$tmp" || exit 1
if [ -n "$6" ]; then chown -- "$6" "$tmp" || exit 1; fi
trap - EXIT`

// fetchFrom copies the file from holder h to env's host at dest. It
// reports whether the holder is to blame for a failure (unreachable, wrong
// bytes) rather than this host.
func fetchFrom(ctx context.Context, env *step.Env, h *holder, sum, dest string, opts transport.PutOptions) (holderFault bool, err error) {
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return false, err
	}
	token := hex.EncodeToString(tok)
	n, err := rand.Int(rand.Reader, big.NewInt(40000))
	if err != nil {
		return false, err
	}
	port := strconv.FormatInt(20000+n.Int64(), 10)
	suffix := make([]byte, 6)
	if _, err := rand.Read(suffix); err != nil {
		return false, err
	}
	tmp := dest + ".kubexm-relay." + hex.EncodeToString(suffix)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	served := make(chan error, 1)
	go func() {
		res, err := h.t.Run(sctx, transport.Command{Argv: []string{"/bin/sh", "-c", relayServe, "sh", h.addr, port, h.path},
			Env: map[string]string{"KUBEXM_RELAY_TOKEN": token}, Become: h.become})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("%s: serving %s failed (rc %d): %s", h.host, h.path, res.ExitCode, res.Stderr)
		}
		served <- err
	}()
	owner := opts.Owner
	if opts.Group != "" {
		owner += ":" + opts.Group
	}
	res, err := env.Target.Run(ctx, transport.Command{
		Argv: []string{"/bin/sh", "-c", relayFetch, "sh", h.addr, port, dest, sum, fmt.Sprintf("%04o", opts.Mode.Perm()), owner, tmp},
		Env:  map[string]string{"KUBEXM_RELAY_TOKEN": token}, Become: opts.Become})
	stop()
	serr := <-served
	if err != nil {
		return false, err
	}
	switch res.ExitCode {
	case 0:
		return false, placeVerified(ctx, env, tmp, dest, sum, opts.Become)
	case 20:
		return true, fmt.Errorf("%s: cannot reach %s (%s:%s) for %s: %v", env.Target.Host(), h.host, h.addr, port, dest, serr)
	case 21:
		return true, fmt.Errorf("%s: %s from %s has the wrong sha256: discarded", env.Target.Host(), dest, h.host)
	}
	return false, fmt.Errorf("%s: receiving %s from %s failed (rc %d): %s", env.Target.Host(), dest, h.host, res.ExitCode, res.Stderr)
}

// placeVerified moves tmp, whose sha256 the host verified to be sum, over
// dest: where the transport keeps sum records, with dest's sum recorded, so
// the next run does not read the file again.
func placeVerified(ctx context.Context, env *step.Env, tmp, dest, sum string, become bool) error {
	var err error
	if r, ok := env.Target.(transport.SumRenamer); ok {
		err = r.RenameSum(ctx, tmp, dest, sum, become)
	} else {
		var res transport.Result
		res, err = env.Target.Run(ctx, transport.Command{Argv: []string{"mv", "-f", "--", tmp, dest}, Become: become})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("%s: rename %s to %s: %s", env.Target.Host(), tmp, dest, bytes.TrimSpace(res.Stderr))
		}
	}
	if err != nil {
		// The command may not have run: the temporary file goes.
		env.Target.Run(context.WithoutCancel(ctx), transport.Command{Argv: []string{"rm", "-f", "--", tmp}, Become: become})
	}
	return err
}

// relayAddr is the address other hosts reach this host at.
func relayAddr(env *step.Env) string {
	if a, ok := env.Vars["internal_address"].(string); ok {
		return a
	}
	return ""
}

// sendRelayed gets the file with sum to env's host at dest from a holder
// when it can, else uploads it; then the host holds it. It returns where
// the file came from.
func (r *relays) sendRelayed(ctx context.Context, env *step.Env, src, sum, dest string, opts transport.PutOptions) (string, error) {
	me := &holder{host: env.Target.Host(), addr: relayAddr(env), path: dest, t: env.Target, become: opts.Become}
	tried := map[*holder]bool{}
	direct := false
	for {
		from, err := r.acquire(ctx, sum, me.host, tried, direct)
		if err != nil {
			return "", err
		}
		start := time.Now()
		if from.h == nil {
			_, err := env.Target.PutFile(ctx, src, dest, opts)
			if err != nil {
				r.finish(sum, from, false, nil)
				return "", err
			}
			r.finish(sum, from, false, me)
			env.Logf("distribute: %s uploaded in %s", dest, time.Since(start).Round(time.Millisecond))
			return "the control machine", nil
		}
		tried[from.h] = true
		fault, err := fetchFrom(ctx, env, from.h, sum, dest, opts)
		if err == nil {
			r.finish(sum, from, false, me)
			env.Logf("distribute: %s from %s in %s", dest, from.h.host, time.Since(start).Round(time.Millisecond))
			return from.h.host, nil
		}
		r.finish(sum, from, fault, nil)
		if ctx.Err() != nil {
			return "", err
		}
		// Not the holder's fault: this host cannot receive that way (no
		// bash, no timeout): a direct upload then.
		direct = !fault
		env.Logf("distribute: %v; trying another source", err)
	}
}
