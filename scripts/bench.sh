#!/usr/bin/env bash
# `make bench`: a curated set of benchmarks, run natively and compiled to
# GOOS=js GOARCH=wasm (under Node.js) in one go, then printed side by side
# with the js/native ratio of their CPU time per op (cpu-ns/op: the
# benchmark thread's CPU time natively, the Node process's under js; see
# shared/internal/benchclock) and, for reference, of their wall time.
# Figures from one run on the same machine are comparable; absolute
# numbers on a small shared machine are not. About 35 s on two loaded cores.
#
# BENCH_COUNT=N repeats every benchmark N times (benchratio then prints
# medians and ranges); BENCHTIME overrides -benchtime (default 10x).
# The 1,000-report secure-summation round is `make bench-round`; the
# servers' load benchmarks are `make load`.
#
# Under js, Node compiles wasm code first with its baseline compiler and
# optimizes a function only once it is hot: a benchmark of 10 iterations
# that does not warm up measures mostly baseline code (the envelope
# benchmarks warm up for 300 ms first; see BenchmarkSealColdWarm).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${BENCH_OUT:-out/bench}
mkdir -p "$out"
wasm_exec="$(go env GOROOT)/lib/wasm/go_js_wasm_exec"
benchtime=${BENCHTIME:-10x}
count=${BENCH_COUNT:-1}

# The curated set: "package pattern", run on both sides. Every benchmark
# here reports cpu-ns/op. Add a line to add a benchmark; a package that
# does not exist (yet) is skipped.
curated=(
  "./shared/logreg ^(BenchmarkLocalEpoch|BenchmarkGradient)$"
  "./shared/envelope ^BenchmarkSealValues$"
  "./shared/secagg ^(BenchmarkShard|BenchmarkEngine|BenchmarkQuantize)$"
  "./shared/client ^(BenchmarkRoundMNIST|BenchmarkRoundSecAgg)$"
  # PINE itself (secagg's BenchmarkShard and BenchmarkEngine put it beside
  # the SumVec baseline in one run).
  "./shared/pine ^(BenchmarkShard|BenchmarkPrep)$"
)

: >"$out/native.txt"
: >"$out/js.txt"
for entry in "${curated[@]}"; do
  pkg=${entry%% *}
  pat=${entry#* }
  if [ ! -d "$pkg" ]; then
    echo "== $pkg: not in this tree, skipped"
    continue
  fi
  echo "== $pkg $pat: native"
  go test -run '^$' -bench "$pat" -benchmem -benchtime "$benchtime" -count "$count" "$pkg" | tee -a "$out/native.txt"
  echo "== $pkg $pat: GOOS=js GOARCH=wasm under node"
  GOOS=js GOARCH=wasm go test -run '^$' -bench "$pat" -benchmem -benchtime "$benchtime" -count "$count" \
    -exec="$wasm_exec" "$pkg" | tee -a "$out/js.txt"
done
echo "== side by side (CPU time per op; wall time ratio for reference)"
go run ./scripts/benchratio "$out/native.txt" "$out/js.txt"
