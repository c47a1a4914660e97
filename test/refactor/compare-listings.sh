#!/bin/sh
# compare-listings.sh OLD NEW: the --list-tasks, --list-tags and
# --list-hosts of every built-in playbook (playbooks/*) printed by two kubexm
# binaries must be identical. A restructuring of the engine that changes no
# behaviour keeps them so (issue 48: build the old binary from main before
# the change, the new one after, and run this).
set -eu
old=$1 new=$2
here=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The sample cluster.yaml (all-in-one on this machine) of the old binary.
cluster=$tmp/cluster.yaml
"$old" create config -o "$cluster" >/dev/null 2>&1
fail=0 n=0
for dir in "$here"/playbooks/*/; do
	pb=$(basename "$dir")
	for flag in --list-tasks --list-tags --list-hosts; do
		for bin in old new; do
			eval exe=\$$bin
			# The exit status is part of the listing: a refusal must stay one.
			(cd "$tmp" && "$exe" play "$pb" -i "$cluster" $flag >"$tmp/$bin.out" 2>&1; echo "exit $?" >>"$tmp/$bin.out")
		done
		n=$((n + 1))
		if ! cmp -s "$tmp/old.out" "$tmp/new.out"; then
			echo "$pb $flag differs:"
			diff -u "$tmp/old.out" "$tmp/new.out" | head -40
			fail=1
		fi
	done
done
echo "$n listings compared"
exit $fail
