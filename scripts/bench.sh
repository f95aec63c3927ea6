#!/usr/bin/env bash
# Runs the benchmarks natively and compiled to GOOS=js GOARCH=wasm (under
# Node.js) in one go, then prints them side by side with the wasm/native
# ratio. Figures from one run on the same machine are comparable; absolute
# numbers on a small shared machine are not. BENCH_COUNT=N repeats every
# benchmark N times (benchratio then prints medians and ranges).
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
native_pkgs=${BENCH_PKGS:-./...}
js_pkgs=${BENCH_JS_PKGS:-./shared/...}

echo "== native (go test -bench, benchtime=$benchtime)"
go test -run '^$' -bench . -benchmem -benchtime "$benchtime" -count "$count" $native_pkgs | tee "$out/native.txt"
echo "== GOOS=js GOARCH=wasm under node"
GOOS=js GOARCH=wasm go test -run '^$' -bench . -benchmem -benchtime "$benchtime" -count "$count" \
  -exec="$wasm_exec" $js_pkgs | tee "$out/js.txt"
echo "== side by side"
go run ./scripts/benchratio "$out/native.txt" "$out/js.txt"
