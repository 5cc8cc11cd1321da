# Shared by the bench/tip and bench/spec scripts through their common.sh (sourced, not run). Set
# BENCH_NAME (tip, spec) first: the scratch directory and bench/results/$BENCH_NAME are named by
# it. Gives the build's programs, a scratch 4-disk volume under /tmp that a trap always unmounts
# and removes, cold mounts, medians, ratios and a note of the machine's state.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD_DIR:-build}  # relative to the repository, or absolute
[[ $BUILD = /* ]] || BUILD=$REPO/$BUILD
TIPFS=$BUILD/cli/tipfs
GEN=$BUILD/bench/workloads/tipfs-bench-gen
AGREP=$BUILD/bench/workloads/tipfs-bench-agrep
RESULTS=$REPO/bench/results/$BENCH_NAME

need() {
  local p
  for p; do
    [[ -x $p ]] || { echo "missing $p: cmake --build $BUILD --target $(basename "$p")" >&2; exit 1; }
  done
}
need "$TIPFS"
[[ $(id -u) = 0 ]] || { echo "run as root: the benchmarks drop the page cache and mount FUSE" >&2; exit 1; }

# TIPFS_BENCH_TMP: where the scratch volume goes (default /tmp). A tmpfs such as /dev/shm keeps
# the backing files in memory when other benchmarks on the machine drop the page cache.
WORK=$(mktemp -d "${TIPFS_BENCH_TMP:-/tmp}/tipfs-${BENCH_NAME}bench-XXXXXX")
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
# median_where CSV COLUMN [FIELD=VALUE...]: the median of COLUMN over the rows of CSV whose every
# FIELD equals VALUE. COLUMN and FIELD are header names or 1-based column numbers; a VALUE may
# itself hold "=" (a profile such as "none;L=2ms").
median_where() {
  local csv=$1 column=$2
  shift 2
  awk -F, -v csv="$csv" -v column="$column" -v filters="$*" '
    function col(name) { return name ~ /^[0-9]+$/ ? name + 0 : at[name] }
    NR == 1 {
      for (i = 1; i <= NF; i++) at[$i] = i
      n = split(filters, f, " ")
      for (j = 1; j <= n; j++) {
        eq = index(f[j], "="); field[j] = col(substr(f[j], 1, eq - 1)); want[j] = substr(f[j], eq + 1)
      }
      c = col(column)
      if (!c) { print "median_where: " csv " has no column " column > "/dev/stderr"; exit 1 }
      for (j = 1; j <= n; j++)
        if (!field[j]) { print "median_where: " csv " has no column for " f[j] > "/dev/stderr"; exit 1 }
      next
    }
    { for (j = 1; j <= n; j++) if ($field[j] != want[j]) next; print $c }' "$csv" | median
}
# ratio A B: A / B with 3 decimals; "-" when either is missing or B is not positive
ratio() {
  awk -v a="$1" -v b="$2" 'BEGIN {if (a != "nan" && b != "nan" && a != "" && b + 0 > 0) printf "%.3f\n", a / b; else print "-"}'
}
machine_note() {
  printf '# %s, %s CPUs, load average %s (a shared machine: see bench/%s/README.md)\n' \
    "$(date -u +%Y-%m-%dT%H:%MZ)" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$BENCH_NAME"
}
