#!/usr/bin/env bash
# Runs every measurement one at a time under nice -n 10; appends one JSON line per
# command to results.jsonl: {"cmd":..., "load_before":..., "load_after":..., "res":...}.
set -euo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-results-pass1.jsonl}
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
# Pass 1: configurations run one after another (all reps of one, then the next).
for e in $ENGINES; do
  for n in 1000 10000; do
    for v in a b; do
      for c in 1 4; do
        for r in $(seq "$REPS"); do
          m run ./bench -engine "$e" -n "$n" -variant "$v" -conc "$c"
        done
        m strace ./strace-count.sh ./bench -engine "$e" -n "$n" -variant "$v" -conc "$c"
      done
      m kill ./bench -mode kill -engine "$e" -n "$n" -variant "$v" -conc 1
    done
  done
  m strace0 ./strace-count.sh ./bench -engine "$e" -n 0
done
if [[ " $ENGINES " == *" bbolt "* ]]; then
  for n in 1000 10000; do for v in a b; do
    for r in $(seq "$REPS"); do m run ./bench -engine bbolt-batch -n "$n" -variant "$v" -conc 4; done
    m strace ./strace-count.sh ./bench -engine bbolt-batch -n "$n" -variant "$v" -conc 4
  done; done
fi
