#!/bin/sh
# kubexm's scheduled etcd snapshot (roles/etcd, spec.etcd.backupPeriod), run by
# kubexm-etcd-backup.service: one snapshot of this member into $BACKUP_DIR,
# checked with etcdutl before it takes its final name, then only the newest
# $KEEP snapshots of this member are kept. Every value comes from the unit's
# environment, none is part of this text.
set -eu
umask 077
mkdir -p -- "$BACKUP_DIR"
# Nanoseconds: two runs within a second get two names.
stamp=$(date -u +%Y%m%dT%H%M%S.%NZ)
final="$BACKUP_DIR/etcd-$NAME-$stamp.db"
part="$BACKUP_DIR/.etcd-$NAME-$stamp.db.part"
trap 'rm -f -- "$part"' EXIT
"$ETCDCTL" --endpoints="$ENDPOINT" --cacert="$CACERT" --cert="$CERT" --key="$KEY" \
  snapshot save "$part" >/dev/null
# A damaged or cut snapshot fails here and never replaces a good one.
"$ETCDUTL" snapshot status "$part" >/dev/null
mv -f -- "$part" "$final"
echo "etcd snapshot $final ($(wc -c <"$final") bytes)"
# The names sort by time; keep the newest $KEEP of this member.
find "$BACKUP_DIR" -maxdepth 1 -type f -printf '%f\n' | grep -E "^etcd-$NAME-[0-9]{8}T[0-9]{6}(\.[0-9]{9})?Z\.db\$" | sort -r | tail -n "+$((KEEP + 1))" |
  while read -r old; do
    rm -f -- "$BACKUP_DIR/$old"
    echo "removed the older snapshot $BACKUP_DIR/$old"
  done
