#!/usr/bin/env bash
# Build time (clean GOCACHE; modules already in GOMODCACHE), binary size (plain and
# -ldflags='-s -w'), and whether GOOS=js GOARCH=wasm builds, for each tiny/ binary.
# Appends JSON lines to builds.jsonl.
set -uo pipefail
cd "$(dirname "$0")"
mkdir -p bin
for t in ${TINY:-none bbolt sqlite datastore minilog}; do
  lb=$(cut -d' ' -f1-3 /proc/loadavg)
  c=$(mktemp -d)
  tf=$(mktemp)
  GOCACHE=$c /usr/bin/time -f '%e %U %S %M' -o "$tf" nice -n 10 go build -o bin/$t ./tiny/$t
  read -r wall user sys rss <"$tf"
  GOCACHE=$c nice -n 10 go build -ldflags='-s -w' -o bin/$t-stripped ./tiny/$t
  if werr=$(GOCACHE=$c GOOS=js GOARCH=wasm nice -n 10 go build -o bin/$t.wasm ./tiny/$t 2>&1); then wasm=ok; else wasm=FAIL; fi
  la=$(cut -d' ' -f1-3 /proc/loadavg)
  rm -rf "$c" "$tf"
  jq -cn --arg t "$t" --arg wall "$wall" --arg user "$user" --arg sys "$sys" --arg rss "$rss" \
    --arg size "$(stat -c %s bin/$t)" --arg ssize "$(stat -c %s bin/$t-stripped)" \
    --arg wasm "$wasm" --arg werr "$(echo "$werr" | head -5)" \
    --arg wsize "$( [ -f bin/$t.wasm ] && stat -c %s bin/$t.wasm || echo -)" --arg lb "$lb" --arg la "$la" \
    '{tiny:$t, build_wall_s:$wall, build_user_s:$user, build_sys_s:$sys, build_maxrss_kb:$rss, size:$size, size_stripped:$ssize, wasm:$wasm, wasm_err:$werr, wasm_size:$wsize, load_before:$lb, load_after:$la,
      cmd:("GOCACHE=$(mktemp -d) /usr/bin/time nice -n 10 go build -o bin/"+$t+" ./tiny/"+$t+" ; go build -ldflags=\"-s -w\" -o bin/"+$t+"-stripped ./tiny/"+$t+" ; GOOS=js GOARCH=wasm go build ./tiny/"+$t)}' >>builds.jsonl
done
