#!/usr/bin/env python3
"""Turns results.jsonl and builds.jsonl into the markdown tables of RESULTS.md (stdout)."""
import json, statistics, sys
from collections import defaultdict

args = [a for a in sys.argv[1:] if not a.startswith('--')]
only = '--no-builds' in sys.argv
rows = [json.loads(l) for l in open(args[0] if args else 'results.jsonl')]
runs, strace, kills, base = defaultdict(list), {}, {}, {}
for r in rows:
    t, res = r['tag'], r['res']
    if t == 'run':
        runs[(res['engine'], res['n'], res['variant'], res['conc'])].append(r)
    elif t == 'strace':
        b = res['bench']; strace[(b['engine'], b['n'], b['variant'], b['conc'])] = r
    elif t == 'strace0':
        base[res['bench']['engine']] = r
    elif t == 'kill':
        kills[(res['engine'], res['n'], res['variant'])] = r

def syncs(r): return sum(r['res']['sync'].values())
def fmt(x, d=0): return f"{x:,.{d}f}"

order = ['bbolt', 'bbolt-batch', 'sqlite', 'datastore', 'minilog']
print("### Round cost per report\n")
print("Medians of %s runs per row (bytes and sizes are from the median-wall run; they vary little). "
      "`write_bytes`: /proc/self/io write_bytes delta over the round (chunks + closing transaction, excluding Open/Close), "
      "page-granular bytes dirtied for the storage layer; `+close` also counts Close() (SQLite's final WAL checkpoint). "
      "`wchar`: bytes passed to write syscalls. fsyncs: strace -f -c count of fsync+fdatasync for the whole process "
      "minus the same count for an n=0 run (Open+Close of a fresh store), divided by n. Store size: sum of file sizes "
      "in the store directory after the round (still open / after Close).\n" % max(len(v) for v in runs.values()))
print("| engine | n | aggregate | chunks in flight | write_bytes/report | +close /report | wchar/report | fsyncs/report | wall µs/report median (min–max) | CPU µs/report | store size open / closed (bytes) | load avg (1,5,15 min) before rep 1 → after rep %d | commands |" % max(len(v) for v in runs.values()))
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
for k in sorted(runs, key=lambda k: (order.index(k[0]), k[1], k[2], k[3])):
    e, n, v, c = k
    rs = runs[k]
    walls = [r['res']['wall_ms'] for r in rs]; cpus = [r['res']['cpu_ms'] for r in rs]
    mid = sorted(rs, key=lambda r: r['res']['wall_ms'])[len(rs)//2]['res']
    st = strace.get(k)
    fs = (syncs(st) - syncs(base[e])) / n if st and e in base else float('nan')
    if st and e == 'bbolt-batch' and 'bbolt' in base:
        fs = (syncs(st) - syncs(base['bbolt'])) / n
    detail = ''
    if st:
        detail = '+'.join(f"{kk}:{vv}" for kk, vv in st['res']['sync'].items())
    vname = {'a': '(a) every chunk', 'b': '(b) every 64 reports'}[v]
    cmd = f"`{rs[0]['cmd']}` ×{len(rs)}; `{st['cmd']}`" if st else f"`{rs[0]['cmd']}`"
    print(f"| {e} | {n:,} | {vname} | {c} | {fmt(mid['write_bytes_round']/n)} | {fmt(mid['write_bytes_withclose']/n)} | "
          f"{fmt(mid['wchar_round']/n)} | {fs:.3f} ({detail}) | {fmt(statistics.median(walls)*1000/n,1)} | "
          f"{fmt(statistics.median(cpus)*1000/n,1)} | {fmt(mid['size_open'])} / {fmt(mid['size_closed'])} | "
          f"{rs[0]['load_before']} → {rs[-1]['load_after']} | {cmd} |")
print()
print("fsync baselines (n=0: Open+Close of a fresh store): " + "; ".join(
    f"{e}: {base[e]['res']['sync']} (`{base[e]['cmd']}`)" for e in order if e in base))
print()
print("### Recovery after SIGKILL mid-round\n")
print("The round runs in a child process (`-mode run -progress`, one line per committed chunk); the parent sends SIGKILL "
      "once half the chunks are acknowledged, then times Open + first read (the aggregate and a count of the nonce keys) "
      "in 3 fresh processes, median shown. Page cache is warm (caches are not dropped: the machine is shared).\n")
print("| engine | n | aggregate | chunks acked when killed | store size after kill (bytes) | recovered nonces / agg bytes | Open ms | first read ms | Open+read ms (median of 3) | load avg before → after | command |")
print("|---|---:|---|---:|---:|---|---:|---:|---:|---|---|")
for k in sorted(kills, key=lambda k: (order.index(k[0]), k[1], k[2])):
    r = kills[k]; res = r['res']
    med = sorted(res['recover_runs'], key=lambda x: x['total_ms'])[1]
    vname = {'a': '(a)', 'b': '(b)'}[k[2]]
    print(f"| {k[0]} | {k[1]:,} | {vname} | {res['killed_after_chunks']} | {fmt(res['size_killed'])} ({', '.join(res['files_killed'])}) | "
          f"{med['nonces']} / {med['agg_len']} | {med['open_ms']:.2f} | {med['read_ms']:.2f} | {res['recover_median_ms']:.2f} | "
          f"{r['load_before']} → {r['load_after']} | `{r['cmd']}` |")
print()
if only:
    sys.exit(0)
try:
    b = [json.loads(l) for l in open('builds.jsonl')]
except FileNotFoundError:
    b = []
if b:
    print("### Build time, binary size, js/wasm\n")
    print("Clean build cache per binary (`GOCACHE=$(mktemp -d)`: the standard library is compiled too), modules already "
          "downloaded. Times from /usr/bin/time. Stripped = `-ldflags='-s -w'`.\n")
    print("| tiny binary imports | build wall s | user+sys CPU s | max RSS MB | size (bytes) | stripped (bytes) | GOOS=js GOARCH=wasm | load avg before → after | command |")
    print("|---|---:|---:|---:|---:|---:|---|---|---|")
    for x in b:
        el = [l for l in x['wasm_err'].splitlines() if 'undefined' in l or 'exclude' in l]
        w = x['wasm'] + (f" ({int(x['wasm_size']):,} bytes)" if x['wasm'] == 'ok' else f": `{el[0].strip() if el else x['wasm_err']}`")
        print(f"| {x['tiny']} | {float(x['build_wall_s']):.1f} | {float(x['build_user_s'])+float(x['build_sys_s']):.1f} | "
              f"{int(x['build_maxrss_kb'])/1024:.0f} | {int(x['size']):,} | {int(x['size_stripped']):,} | {w} | "
              f"{x['load_before']} → {x['load_after']} | `{x['cmd']}` |")

import glob
dfiles = sorted(glob.glob('diskbytes-run*.jsonl'))
if dfiles:
    d = [[json.loads(l) for l in open(f)] for f in dfiles]
    print()
    print("### Device bytes written (private loop-device ext4)\n")
    print("A 1 GiB ext4 image on /dev/loopN (`./diskbytes.sh setup`), one run per row and pass; bytes = delta of "
          "/sys/block/loopN/stat sectors written × 512 across `bench` (fresh store: Open, round, Close) and a following "
          "`sync -f`; this is what the file system sent to its block device, ext4 journal included, and only this "
          "benchmark uses that device. Per report = (bytes − bytes of the n=0 run) / n. Timings on the loop device are "
          "not used.\n")
    print("| engine | n | aggregate | chunks in flight | device bytes/report (pass " + ", ".join(str(i+1) for i in range(len(d))) + ") | wchar/report (same run) | /proc write_bytes/report (same run) | command (pass 1; pass 2 identical) |")
    print("|---|---:|---|---:|---:|---:|---:|---|")
    zero = {}
    for run in d:
        for x in run:
            if x['n'] == 0: zero.setdefault(x['engine'], []).append(x['device_bytes'])
    for i, x in enumerate(d[0]):
        if x['n'] == 0: continue
        per = [ (run[i]['device_bytes'] - zero[x['engine']][j]) / x['n'] for j, run in enumerate(d)]
        print(f"| {x['engine']} | {x['n']:,} | ({x['variant']}) | {x['conc']} | {' / '.join(fmt(p) for p in per)} | "
              f"{fmt(x['res']['wchar_round']/x['n'])} | {fmt(x['res']['write_bytes_withclose']/x['n'])} | `{x['cmd']}` |")
