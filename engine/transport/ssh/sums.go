package ssh

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path"

	"github.com/mensylisir/kubexm/engine/transport"
)

// sumFunc defines kxsum FILE RECORD RO, which prints `sha256sum -- FILE`'s
// line for a regular file (status 3: no such file; 4: not a regular file). With a RECORD file (the
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
// written or removed.
const sumFunc = `kxsum() {
p=$1 r=$2 ro=$3
if [ ! -f "$p" ]; then [ -e "$p" ] && return 4; return 3; fi
s=$(stat -L -c '%s %i %d %y %z' -- "$p") || return 5
if [ -n "$r" ] && [ -f "$r" ]; then
  { IFS= read -r rs; IFS= read -r rsum; } <"$r"
  if [ "$rs" = "$s" ] && [ "${#rsum}" = 64 ]; then printf '%s  %s\n' "$rsum" "$p"; return 0; fi
fi
out=$(sha256sum -- "$p") || return 5
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
