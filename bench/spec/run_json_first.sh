#!/bin/bash
# One cold first run of the json loader (issue 10) under `tipfs run`, no history, an empty state
# directory; hp-c2247 x4, 12 MiB cache, direct. Counters in $W/tipspec.txt, $W/stats.{json,txt}.
# Scratch under /tmp/jsonfirst (kept between runs: the 600 files are generated once); run as root.
set -euo pipefail
R=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd); B=${BUILD_DIR:-$R/build}; T=$B/cli/tipfs
W=${JSONFIRST_DIR:-/tmp/jsonfirst}
MNT=$W/mnt; D=($W/disk0 $W/disk1 $W/disk2 $W/disk3)
cleanup() { findmnt -n $MNT >/dev/null 2>&1 && { $T umount $MNT || umount -l $MNT; }; true; }
trap cleanup EXIT
if [[ ! -f $W/made ]]; then
  rm -rf "${D[@]}"; mkdir -p "${D[@]}" $MNT
  $T mkfs "${D[@]}" >/dev/null
  $T mount "${D[0]}" $MNT
  /usr/bin/python3 $R/bench/workloads/json_loader.py generate $MNT --seed 1 --files 600
  $T umount $MNT; touch $W/made
fi
sync; echo 3 >/proc/sys/vm/drop_caches
$T mount --cache-size 12M --hints on --data-cache direct --disk-model hp-c2247 --log $W/daemon.log "${D[0]}" $MNT
rm -rf $W/state; mkdir -p $W/state; rm -f $W/tipspec.txt
echo "load before: $(cat /proc/loadavg)"
s=$EPOCHREALTIME
(cd $MNT && TIPSPEC_HISTORY=0 TIPSPEC_STATE_DIR=$W/state TIPSPEC_LIBRARY=$B/speculate/libtipspec.so \
   $T run --mount $MNT --stats-file $W/tipspec.txt -- /usr/bin/python3 $R/bench/workloads/json_loader.py load . --seed 1 >$W/out 2>$W/err)
echo "elapsed $(awk -v a=$s -v b=$EPOCHREALTIME 'BEGIN{print b-a}')"
echo "load after: $(cat /proc/loadavg)"
$T stats --json $MNT > $W/stats.json
$T stats $MNT > $W/stats.txt || true
$T stats --breakdown --json $MNT > $W/breakdown.json || true
