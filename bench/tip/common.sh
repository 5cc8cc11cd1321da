# Shared by the bench/tip scripts (sourced, not run). Sets up a scratch 4-disk volume under
# /tmp, a trap that always unmounts it and removes the scratch files, cold mounts, medians,
# and readers for the mount's counters.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD_DIR:-build}
[[ $BUILD = /* ]] || BUILD=$REPO/$BUILD
TIPFS=$BUILD/cli/tipfs
GEN=$BUILD/bench/workloads/tipfs-bench-gen
AGREP=$BUILD/bench/workloads/tipfs-bench-agrep
RANDOM_READER=$BUILD/bench/tip/tipfs-tip-random-reader
FILE_READER=$BUILD/bench/tip/tipfs-tip-file-reader
RESULTS=$REPO/bench/results/tip

need() {
  local p
  for p; do
    [[ -x $p ]] || { echo "missing $p: cmake --build $BUILD --target $(basename "$p")" >&2; exit 1; }
  done
}
need "$TIPFS"
[[ $(id -u) = 0 ]] || { echo "run as root: the benchmarks drop the page cache and mount FUSE" >&2; exit 1; }

WORK=$(mktemp -d /tmp/tipfs-tipbench-XXXXXX)
MNT=$WORK/mnt
DISKS=("$WORK"/disk0 "$WORK"/disk1 "$WORK"/disk2 "$WORK"/disk3)
cleanup() {
  if findmnt -n "$MNT" >/dev/null 2>&1; then "$TIPFS" umount "$MNT" || umount -l "$MNT"; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM  # the EXIT trap unmounts
mkdir -p "${DISKS[@]}" "$MNT" "$RESULTS"

make_volume() { "$TIPFS" mkfs "${DISKS[@]}" >/dev/null; }
unmount() { if findmnt -n "$MNT" >/dev/null 2>&1; then "$TIPFS" umount "$MNT"; fi; }
# cold_mount MOUNT-ARGS...: a fresh daemon (empty cache) on an empty page cache.
cold_mount() {
  unmount
  sync
  echo 3 >/proc/sys/vm/drop_caches
  "$TIPFS" mount "$@" "${DISKS[0]}" "$MNT"
}
# median of the numbers on stdin (mean of the middle two for an even count)
median() {
  sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "nan"; else if (NR % 2) print a[(NR+1)/2];
                                 else print (a[NR/2] + a[NR/2+1]) / 2}'
}
# field KEY "LINE": the value of KEY=VALUE in a report line, without a trailing "s" (seconds)
field() { tr ' ' '\n' <<<"$2" | awk -F= -v k="$1" '$1 == k {sub(/s$/, "", $2); print $2; exit}'; }
# counter KEY: a top-level number of the mount's .tipfs/stats.json
counter() { grep -o "\"$1\":[-0-9.e+]*" "$MNT/.tipfs/stats.json" | head -1 | cut -d: -f2; }
# disk_util: mean utilization of the emulated disks (0..1)
disk_util() {
  grep -o '"utilization":[-0-9.e+]*' "$MNT/.tipfs/stats.json" | cut -d: -f2 |
    awk '{s += $1; n++} END {printf "%.3f\n", n ? s / n : 0}'
}
# daemon_cpu: user + sys seconds the daemon has used so far
daemon_cpu() {
  local pid
  pid=$(cat "${DISKS[0]}/tipfs.pid")
  awk -v hz="$(getconf CLK_TCK)" '{sub(/^.*\) /, ""); print ($12 + $13) / hz}' "/proc/$pid/stat"
}
# ratio A B: A / B with 3 decimals
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f\n", (b > 0) ? a / b : 0}'; }
machine_note() {
  printf '# %s, %s CPUs, load average %s (a shared, noisy machine: see README)\n' \
    "$(date -u +%Y-%m-%dT%H:%MZ)" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
}
