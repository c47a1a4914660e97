#!/bin/bash
# failed-tests.sh LOG [LINES] prints, for each test that failed in a `go test -v` log, the last
# LINES (default 12) lines of its own output before the mark the e2e suites log after their
# first failure (markFirstFailure in test/e2e), or else before its failure report or its end,
# and a timeout's list of the tests then running. Parallel tests interleave in the log; go
# test's "=== RUN/CONT/NAME" lines say whose each line is.
# CI prints this last, so that the part of its output a reader sees first names the failure.
set -euo pipefail
log=${1:?usage: failed-tests.sh LOG [LINES]}
keep=${2:-12}
[[ $keep =~ ^[0-9]+$ ]] || {
  echo "failed-tests.sh: LINES must be a number, not '$keep'" >&2
  exit 2
}
awk -v keep="$keep" '
function clip(s) { return length(s) > 240 ? substr(s, 1, 240) "..." : s }
/^=== (RUN|CONT|NAME|PAUSE) / { cur = $3; sub(/\/.*/, "", cur); next }
/^--- FAIL: Test[^ \/]* / { failed[++nf] = $3; next }
/^panic: test timed out/ { timeout = $0; intimeout = 1; cur = ""; next }
/^(PASS|FAIL)$|^(ok|FAIL)\t|^== / { cur = ""; next }
intimeout && /^\trunning tests:/ { next }
intimeout && /^\t\t/ {
  running = running "\n  " clip(substr($0, 3))
  name = substr($0, 3); sub(/ .*/, "", name); sub(/\/.*/, "", name)
  if (!(name in stuck)) { stuck[name] = 1; failed[++nf] = name }
  next
}
intimeout { intimeout = 0 }
cur != "" {
  n[cur]++
  line[cur, n[cur]] = $0
  if (!(cur in mark) && index($0, "==== the first failure is above this line")) mark[cur] = n[cur]
  if (!(cur in report) && index($0, "==== failure report")) report[cur] = n[cur]
}
END {
  for (i = 1; i <= nf; i++) {
    t = failed[i]
    if (t in mark) { end = mark[t] - 1; what = "its first failure'"'"'s mark" }
    else if (t in report) { end = report[t] - 1; what = "its failure report" }
    else { end = n[t]; what = "its end" }
    start = end - keep + 1
    if (start < 1) start = 1
    printf "== failed: %s, the last %d lines before %s:\n", t, end - start + 1, what
    for (j = start; j <= end; j++) print clip(line[t, j])
  }
  if (timeout != "") printf "== %s; running then:%s\n", timeout, running
}' "$log"
