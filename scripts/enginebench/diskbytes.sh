#!/usr/bin/env bash
# Device-level bytes written per round, isolated from the rest of the machine:
# a private ext4 file system on a loop device (file-backed, in this directory);
# /sys/block/loopN/stat field 7 (sectors written, 512 B) is read before a run
# and after the run plus `sync -f` (so ext4 journal writes are included).
# Usage: ./diskbytes.sh setup | run | teardown. Appends JSON lines to diskbytes.jsonl.
set -euo pipefail
cd "$(dirname "$0")"
IMG=$PWD/loop.img MNT=$PWD/loopmnt
case ${1:-} in
setup)
  truncate -s 1G "$IMG"; mkfs.ext4 -q -F "$IMG"
  dev=$(losetup -f --show "$IMG"); echo "$dev" > loopdev
  mkdir -p "$MNT"; mount "$dev" "$MNT"; findmnt "$MNT" ;;
teardown)
  umount "$MNT"; losetup -d "$(cat loopdev)"; rm -f "$IMG" loopdev; rmdir "$MNT" ;;
run)
  dev=$(basename "$(cat loopdev)")
  sect() { awk '{print $7}' /sys/block/$dev/stat; }
  for e in ${ENGINES:-bbolt sqlite datastore minilog}; do
    for cfg in "0 a 1" "1000 a 1" "1000 b 1" "10000 a 1" "10000 b 1" "10000 a 4" "10000 b 4"; do
      read -r n v c <<<"$cfg"
      d=$MNT/$e-$n-$v-$c; rm -rf "$d"; sync -f "$MNT"
      s0=$(sect); lb=$(cut -d' ' -f1-3 /proc/loadavg)
      res=$(nice -n 10 ./bench -engine "$e" -n "$n" -variant "$v" -conc "$c" -dir "$d")
      sync -f "$MNT"; s1=$(sect)
      jq -cn --arg e "$e" --argjson n "$n" --arg v "$v" --argjson c "$c" --argjson b "$(( (s1-s0)*512 ))" \
        --arg lb "$lb" --argjson res "$res" \
        --arg cmd "rm -rf $d; sync -f; nice -n 10 ./bench -engine $e -n $n -variant $v -conc $c -dir $d; sync -f  (bytes = delta of /sys/block/$dev/stat field 7 × 512)" \
        '{engine:$e,n:$n,variant:$v,conc:$c,device_bytes:$b,load:$lb,cmd:$cmd,res:$res}' >> diskbytes.jsonl
      rm -rf "$d"
    done
  done ;;
*) echo "usage: $0 setup|run|teardown" >&2; exit 2 ;;
esac
