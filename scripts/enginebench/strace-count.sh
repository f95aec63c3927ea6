#!/usr/bin/env bash
# strace-count.sh cmd...: runs cmd under strace -f -c counting sync syscalls;
# prints {"sync":{"fsync":N,...},"bench":<cmd's JSON stdout or null>}.
set -euo pipefail
f=$(mktemp)
out=$(strace -f -c -e trace=fsync,fdatasync,sync_file_range,msync,syncfs -o "$f" "$@")
sync=$(awk 'BEGIN{printf "{"; s=""} $NF ~ /^(fsync|fdatasync|sync_file_range|msync|syncfs)$/ {printf "%s\"%s\":%s", s, $NF, $4; s=","} END{print "}"}' "$f")
rm -f "$f"
jq -cn --argjson s "$sync" --argjson b "${out:-null}" '{sync:$s, bench:$b}'
