#!/usr/bin/env bash
# Runs every measurement one at a time under nice -n 10; appends one JSON line per
# command to results.jsonl: {"cmd":..., "load_before":..., "load_after":..., "res":...}.
set -euo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-results.jsonl}
REPS=${REPS:-5}
ENGINES=${ENGINES:-"bbolt sqlite minilog datastore"}
m() { # m TAG cmd...
  local tag=$1; shift
  local lb la res
  lb=$(cut -d' ' -f1-3 /proc/loadavg)
  res=$(nice -n 10 "$@")
  la=$(cut -d' ' -f1-3 /proc/loadavg)
  jq -cn --arg tag "$tag" --arg cmd "nice -n 10 $*" --arg lb "$lb" --arg la "$la" --argjson res "$res" \
    '{tag:$tag, cmd:$cmd, load_before:$lb, load_after:$la, res:$res}' >>"$OUT"
}
# Timing runs are interleaved (rep outermost) so drifts in machine load and disk
# latency spread over all engines; strace and kill runs follow, once per config.
CONFIGS=()
for e in $ENGINES; do for n in 1000 10000; do for v in a b; do for c in 1 4; do
  CONFIGS+=("$e $n $v $c"); done; done; done; done
if [[ " $ENGINES " == *" bbolt "* ]]; then
  for n in 1000 10000; do for v in a b; do CONFIGS+=("bbolt-batch $n $v 4"); done; done
fi
for r in $(seq "$REPS"); do
  for cfg in "${CONFIGS[@]}"; do
    read -r e n v c <<<"$cfg"
    m run ./bench -engine "$e" -n "$n" -variant "$v" -conc "$c"
  done
done
for cfg in "${CONFIGS[@]}"; do
  read -r e n v c <<<"$cfg"
  m strace ./strace-count.sh ./bench -engine "$e" -n "$n" -variant "$v" -conc "$c"
done
for e in $ENGINES; do
  m strace0 ./strace-count.sh ./bench -engine "$e" -n 0
  for n in 1000 10000; do for v in a b; do
    m kill ./bench -mode kill -engine "$e" -n "$n" -variant "$v" -conc 1
  done; done
done
