package ssh

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strings"

	"github.com/mensylisir/kubexm/engine/transport"
)

// sumFunc defines kxsum FILE RECORD RO, which prints a line starting with
// FILE's sha256 in hex for a regular file (status 3: no such file; 4: not a regular file). With a RECORD file (the
// Transport's SumRecords, given only to commands that run as root) the sum
// is read from the record when the file's size, inode, device, mtime and
// ctime (nanoseconds) are those recorded, so a re-run stats a large binary
// instead of reading it; any write to the file changes its ctime, which only
// the kernel sets, so a changed file is hashed again. A sum is recorded only
// when the file's stat was the same before and after hashing and its ctime
// is at least two seconds old: a write in the same timestamp tick as the
// recorded ctime would otherwise go unseen (git's "racy" entries). The
// record directory is made only inside an existing parent (kubexm's state
// directory, which roles/os makes and delete removes): a host kubexm does
// not manage, or no longer does, gets nothing written. With
// RO non-empty (a --check run: transport.ReadOnly) records are read, never
// written or removed. The sum is transport.SHA256Func's.
const sumFunc = transport.SHA256Func + `kxsum() {
p=$1 r=$2 ro=$3
if [ ! -f "$p" ]; then [ -e "$p" ] && return 4; return 3; fi
s=$(stat -L -c '%s %i %d %y %z' -- "$p") || return 5
if [ -n "$r" ] && [ -f "$r" ]; then
  { IFS= read -r rs; IFS= read -r rsum; } <"$r"
  if [ "$rs" = "$s" ] && [ "${#rsum}" = 64 ]; then printf '%s  %s\n' "$rsum" "$p"; return 0; fi
fi
out=$(kxsha256 "$p") || return 5
printf '%s\n' "$out"
[ -n "$r" ] && [ -z "$ro" ] || return 0
c=$(stat -L -c '%Z' -- "$p") && [ "$(stat -L -c '%s %i %d %y %z' -- "$p")" = "$s" ] && [ "$(date +%s)" -ge $((c + 2)) ] || { rm -f -- "$r"; return 0; }
{ { [ -d "${r%/*}" ] || mkdir -m 0700 -- "${r%/*}"; } && printf '%s\n%.64s\n' "$s" "$out" >"$r.$$" && mv -f -- "$r.$$" "$r"; } 2>/dev/null || rm -f -- "$r.$$"
return 0
}
`

// sumArgs are kxsum's arguments for p.
func (t *Transport) sumArgs(ctx context.Context, p string, become bool) []string {
	ro := ""
	if transport.IsReadOnly(ctx) {
		ro = "ro"
	}
	return []string{p, t.sumRecord(p, become), ro}
}

// sumRecord is the record file of p for a command run with become: named by
// the sha256 of p under the SumRecords directory, so any path fits one name;
// "" when records are off or the command does not run as root (the records
// are root's: another user could write a false one).
func (t *Transport) sumRecord(p string, become bool) string {
	dir := t.opts.SumRecords
	if dir == "" || !(become || t.user == "root") {
		return ""
	}
	h := sha256.Sum256([]byte(path.Clean(p)))
	return path.Join(dir, hex.EncodeToString(h[:]))
}

// recordFunc defines kxrec FILE RECORD SUM, which records SUM as the sum of
// FILE as it is now, and kxmv TMP FILE RECORD SUM, which moves TMP over
// FILE first, as rename(2) would (-T: never into a directory FILE). They
// are for a file kubexm has just put in place and whose content it knows
// (sent and renamed into place, or received and its sha256 verified on the
// host): without them the next run would read every such file once to find
// what it was just told (a few hundred MB of binaries and images per host
// after a create).
//
// The record holds the stat taken right after kubexm's own last change (the
// rename, in the same shell). It is written only once the host's clock is
// past that ctime by one timer tick (10 ms: HZ is 100 or more) plus the
// file system's timestamp granularity, and the stat is then unchanged: any
// later write moves the ctime, as kxsum's record requires. The granularity
// divides 10^9 ns and the ctime's nanoseconds, so it is at most their
// greatest common divisor (1 ns in practice); a ctime without nanoseconds
// (a file system with second timestamps) gets no record here, kxsum records
// it on a later read. What this does not see is another process writing
// the file between the rename and the stat a millisecond later, in the same
// tick, without changing its size or inode. Failures leave no record and
// are not errors: the next run hashes the file.
const recordFunc = `kxrec() {
p=$1 r=$2 sum=$3
x=$(stat -L -c '%Z %s %i %d %y %z' -- "$p") || return 0
cs=${x%% *} s=${x#* }
ns=${s% *}
ns=${ns##*.}
case $ns$cs in ''|*[!0-9]*) return 0;; esac
ns=${ns#"${ns%%[!0]*}"}
[ -n "$ns" ] || return 0
a=$ns b=1000000000
while [ "$b" -gt 0 ]; do t=$((a % b)); a=$b; b=$t; done
end=$((cs * 1000000000 + ns + 10000000 + a))
now=$(date +%s%N)
case $now in ''|*[!0-9]*) return 0;; esac
if [ "$now" -lt "$end" ]; then
  [ $((end - now)) -lt 1000000000 ] && sleep "$(printf '0.%09d' $((end - now)))" 2>/dev/null || return 0
  [ "$(date +%s%N)" -ge "$end" ] || return 0
fi
[ "$(stat -L -c '%s %i %d %y %z' -- "$p")" = "$s" ] || return 0
{ { [ -d "${r%/*}" ] || mkdir -m 0700 -- "${r%/*}"; } && printf '%s\n%s\n' "$s" "$sum" >"$r.$$" && mv -f -- "$r.$$" "$r"; } 2>/dev/null || rm -f -- "$r.$$"
return 0
}
kxmv() {
mv -fT -- "$1" "$2" || return 1
[ -z "$3" ] || kxrec "$2" "$3" "$4"
}
`

// recordMinSize: a smaller file costs the next run less to hash (a few
// milliseconds) than the install's wait for the clock to pass its ctime.
const recordMinSize = 1 << 20

// installRecord is the record to write for dst after an install of content
// with sum: "" when records are off for the command, in a --check run, or
// sum is not a sha256.
func (t *Transport) installRecord(ctx context.Context, dst, sum string, become bool) string {
	if transport.IsReadOnly(ctx) || !transport.IsSHA256Hex(sum) {
		return ""
	}
	return t.sumRecord(dst, become)
}

// RenameSum implements transport.SumRenamer: one command moves tmp over
// dst and records sum for dst (recordFunc).
func (t *Transport) RenameSum(ctx context.Context, tmp, dst, sum string, become bool) error {
	argv := []string{"/bin/sh", "-c", recordFunc + `kxmv "$1" "$2" "$3" "$4"`, "sh", tmp, dst, t.installRecord(ctx, dst, sum, become), strings.ToLower(sum)}
	res, err := t.Run(ctx, transport.Command{Argv: argv, Become: become})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%s: rename %s to %s: %s", t.name, tmp, dst, bytes.TrimSpace(res.Stderr))
	}
	return nil
}
