# shellcheck shell=bash
# Sourced by the artifact scripts: reproducible release archives laid out
# as upstream's.

# pack <dir> <archive> <members...>: a reproducible tar.gz of dir's members
# (fixed order, owner and times; gzip without a timestamp).
pack() {
	local dir=$1 archive=$2
	shift 2
	tar -C "$dir" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - "$@" |
		gzip -n -9 >"$archive"
}

# publish_digest <script> <dir> <file>: move file into dir with
# <file>.sha256 holding its bare digest (as cri-tools' releases) and a
# SHA256SUMS listing every file of dir.
publish_digest() {
	local script=$1 dir=$2 file=$3 name
	name=$(basename "$file")
	mkdir -p "$dir"
	touch -d @0 "$file"
	mv -f "$file" "$dir/$name"
	(
		cd "$dir" || exit 1
		sha256sum -- "$name" | cut -d' ' -f1 >"$name.sha256.tmp" && mv -f "$name.sha256.tmp" "$name.sha256"
		# Every release file of the directory (two versions of a
		# component may share one, as docker's static releases do).
		files=()
		for f in *; do
			case $f in *.sha256 | *.sha256sum | SHA256SUMS*) ;; *) files+=("$f") ;; esac
		done
		sha256sum -- "${files[@]}" >SHA256SUMS.tmp && mv -f SHA256SUMS.tmp SHA256SUMS
	)
	echo "$script: $name $(cat "$dir/$name.sha256")" >&2
}
