#!/usr/bin/env bash
# coldstart.sh: what `make run` costs a newcomer. It clones this
# repository's HEAD into a temporary directory, runs `make run` there with
# an empty Go build cache (the module cache is kept: on a fresh machine the
# first run also downloads the modules), and prints the seconds from
# `make run` to the pages being up, to the first round and to the end of
# training, then runlocal's line with each process's peak memory.
# Usage: bash scripts/coldstart.sh   (about 5 to 10 minutes on 2 cores)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap '[ -n "${pid:-}" ] && kill -INT -- "-$pid" 2>/dev/null; sleep 2; chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
git clone -q "$repo" "$tmp/blanket"
cd "$tmp/blanket"
export GOCACHE="$tmp/gocache"
start=$(date +%s)
since() { echo $(( $(date +%s) - start )); }
set -m # make run and its children in a process group of their own
make run > "$tmp/out" 2>&1 &
pid=$!
up="" first=""
while kill -0 "$pid" 2>/dev/null; do
  if [ -z "$up" ] && grep -q '^the pages are up' "$tmp/out"; then up=$(since); echo "pages up after ${up} s (clone, empty build cache: building the relay, the aggregator, the wasm client and its brotli copy)"; fi
  if [ -z "$first" ] && grep -q '^round ' "$tmp/out"; then first=$(since); echo "first round finished after ${first} s"; fi
  if grep -q '^peak memory' "$tmp/out"; then
    echo "training finished after $(since) s"
    grep -E '^(round |peak memory|privacy spent)' "$tmp/out"
    kill -INT -- "-$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    pid=""
    exit 0
  fi
  sleep 1
done
echo "make run ended before training finished:" >&2
tail -20 "$tmp/out" >&2
exit 1
