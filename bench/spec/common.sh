# Shared by the bench/spec scripts (sourced, not run): a scratch 4-disk volume under /tmp that a
# trap always unmounts and removes, cold mounts, one timed run of a command (optionally under
# `tipfs run`) with the mount's and libtipspec's counters, medians and ratios.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD_DIR:-build}
[[ $BUILD = /* ]] || BUILD=$REPO/$BUILD
TIPFS=$BUILD/cli/tipfs
GEN=$BUILD/bench/workloads/tipfs-bench-gen
AGREP=$BUILD/bench/workloads/tipfs-bench-agrep
GNULD=$BUILD/bench/workloads/tipfs-bench-gnuld
RESULTS=$REPO/bench/results/spec

need() {
  local p
  for p; do
    [[ -x $p ]] || { echo "missing $p: cmake --build $BUILD --target $(basename "$p")" >&2; exit 1; }
  done
}
need "$TIPFS" "$BUILD/speculate/libtipspec.so"
[[ $(id -u) = 0 ]] || { echo "run as root: the benchmarks drop the page cache and mount FUSE" >&2; exit 1; }

WORK=$(mktemp -d /tmp/tipfs-specbench-XXXXXX)
MNT=$WORK/mnt
DISKS=("$WORK"/disk0 "$WORK"/disk1 "$WORK"/disk2 "$WORK"/disk3)
cleanup() {
  if findmnt -n "$MNT" >/dev/null 2>&1; then "$TIPFS" umount "$MNT" || umount -l "$MNT"; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM  # the EXIT trap unmounts
mkdir -p "${DISKS[@]}" "$MNT" "$RESULTS"

unmount() { if findmnt -n "$MNT" >/dev/null 2>&1; then "$TIPFS" umount "$MNT"; fi; }
# make_volume: mkfs and mount without a disk model (data sets are written at full speed).
make_volume() { "$TIPFS" mkfs "${DISKS[@]}" >/dev/null && "$TIPFS" mount "${DISKS[0]}" "$MNT"; }
# cold_mount MOUNT-ARGS...: a fresh daemon (empty cache) on an empty page cache.
cold_mount() {
  unmount
  sync
  echo 3 >/proc/sys/vm/drop_caches
  "$TIPFS" mount "$@" "${DISKS[0]}" "$MNT"
}

# timed_run SPECULATE OUT CMD...: runs CMD in the mount root (SPECULATE=1: under `tipfs run`,
# counters to $WORK/tipspec.txt; SPECULATE=wait-on|wait-off|wait-auto: that wait policy), stdout to
# OUT; sets ELAPSED (seconds, from outside: launcher included).
timed_run() {
  local speculate=$1 out=$2
  shift 2
  local -a prefix=()
  rm -f "$WORK/tipspec.txt"
  case $speculate in
    0) ;;
    1) prefix=("$TIPFS" run --mount "$MNT" --stats-file "$WORK/tipspec.txt" --) ;;
    wait-on | wait-off)
      prefix=("$TIPFS" run --mount "$MNT" --wait-for-data "${speculate#wait-}"
              --stats-file "$WORK/tipspec.txt" --) ;;
    wait-auto)  # not a `tipfs run` option: the library's variable
      prefix=(env TIPSPEC_WAIT=auto "$TIPFS" run --mount "$MNT" --stats-file "$WORK/tipspec.txt" --) ;;
  esac
  local start=$EPOCHREALTIME
  (cd "$MNT" && "${prefix[@]}" "$@" >"$out" 2>"$WORK/stderr") ||
    { echo "failed: $* ($(tail -3 "$WORK/stderr"))" >&2; exit 1; }
  ELAPSED=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.3f", b - a}')
}
# counter KEY: a number from the mount's .tipfs/stats.json (0 if absent)
counter() {
  local v
  v=$(grep -o "\"$1\":[-0-9.e+]*" "$MNT/.tipfs/stats.json" | head -1 | cut -d: -f2)
  echo "${v:-0}"
}
# tipspec KEY: libtipspec's counter summed over the processes of the last run (0 if none)
tipspec() {
  [[ -f $WORK/tipspec.txt ]] || { echo 0; return; }
  awk -v k="tipspec.$1" '$1 == k {s += $2} END {print s + 0}' "$WORK/tipspec.txt"
}
# median of the numbers on stdin (mean of the middle two for an even count)
median() {
  sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "nan"; else if (NR % 2) print a[(NR+1)/2];
                                 else print (a[NR/2] + a[NR/2+1]) / 2}'
}
# ratio A B: A / B with 3 decimals
ratio() {
  awk -v a="$1" -v b="$2" 'BEGIN {if (a != "nan" && b != "nan" && b + 0 > 0) printf "%.3f\n", a / b; else print "-"}'
}
machine_note() {
  printf '# %s, %s CPUs, load average %s (a shared machine: see bench/spec/README.md)\n' \
    "$(date -u +%Y-%m-%dT%H:%MZ)" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
}
# The columns every run row carries after its own: the mount's and libtipspec's counters.
COUNTER_HEADER="demand_reads,demand_misses,spec_consumed_blocks,hints_prefetched,hints_used,hints_evicted_unused,hints_cancelled,spec_reads,spec_eagain,forks,restarts,hints_consumed,hint_bytes_issued,hint_bytes_consumed,reads_behind,offtrack_behind,offtrack_mismatch,forks_deferred,overhead_ms,load1"
counter_columns() {
  printf '%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s' \
    "$(counter demand.reads)" "$(counter demand.misses)" "$(counter hints.speculative.consumed)" \
    "$(counter hints.prefetched)" "$(counter hints.used)" "$(counter hints.evicted_unused)" \
    "$(counter hints.cancelled)" "$(counter speculation.reads)" "$(counter speculation.eagain)" \
    "$(tipspec forks)" "$(tipspec restarts)" "$(tipspec hints_consumed)" \
    "$(tipspec hint_bytes_issued)" "$(tipspec hint_bytes_consumed)" "$(tipspec reads_behind)" \
    "$(tipspec offtrack_behind)" "$(tipspec offtrack_mismatch)" "$(tipspec forks_deferred)" \
    "$(awk -v n="$(tipspec overhead_nanos)" 'BEGIN {printf "%.1f", n / 1e6}')" \
    "$(cut -d' ' -f1 /proc/loadavg)"
}
