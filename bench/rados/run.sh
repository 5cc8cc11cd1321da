#!/usr/bin/env bash
# tipfs over RADOS (issue 14 benchmarks): a volume of 4 namespaces of one pool, mounted without a
# disk model and with `--disk-model none,L=2ms` (a 2 ms network and server round trip on top of
# the real one), cold cache every run (remount + drop_caches), medians of --repeats runs.
#   seq      sequential 1 MiB reads of a --seq-size file (dd), against `rados bench seq` (64
#            objects of 4 MiB, 16 in flight) on the same pool
#   agrep    tipfs-bench-agrep over --files text files (--total bytes): original, manual hints,
#            speculating (`tipfs run`); GNU grep -r over the same tree, original and speculating.
#            Goal: speculating / original <= 0.35 with L=2ms.
#   random   --blocks distinct random 64 KiB reads of a --random-size file, disclosed first
#            (TIPFS_IOC_HINT_FD), against `rados bench rand` (2048 objects of 64 KiB, 16 in
#            flight, for 10 s)
# Without --conf it starts a one-node cluster of its own (scripts/ceph-dev.sh, memstore) under the
# scratch directory and always stops it; with --conf/--pool it uses that cluster's pool (fresh
# namespaces, emptied afterwards). Prints one table per part; every run goes to
# bench/results/rados/*.csv. Run as root (drop_caches, FUSE).
# --builds "DIR1 DIR2" alternates builds (before/after) within every repeat, on the same cluster
# and volume (the first one makes it); tables then have one row per build and latency.
# Usage: bench/rados/run.sh [--repeats 3] [--parts "seq agrep random"] [--latencies "0 2ms"]
#          [--conf PATH --pool NAME] [--seq-size 256M] [--files 400] [--total 8M]
#          [--random-size 256M] [--blocks 800] [--cache 12M] [--builds "DIR..."]
usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; }
case ${1:-} in -h | --help) usage; exit 0 ;; esac

BENCH_NAME=rados
source "$(dirname "$0")/../lib/scratch_volume.sh"
REPEATS=3 PARTS="seq agrep random" LATENCIES="0 2ms" CONF="" POOL=tipfs SEQ_SIZE=256M FILES=400
TOTAL=8M RANDOM_SIZE=256M BLOCKS=800 CACHE=12M BUILDS=$BUILD
while (($#)); do
  case $1 in
    --repeats) REPEATS=$2; shift 2 ;;
    --parts) PARTS=$2; shift 2 ;;
    --latencies) LATENCIES=$2; shift 2 ;;
    --conf) CONF=$2; shift 2 ;;
    --pool) POOL=$2; shift 2 ;;
    --seq-size) SEQ_SIZE=$2; shift 2 ;;
    --files) FILES=$2; shift 2 ;;
    --total) TOTAL=$2; shift 2 ;;
    --random-size) RANDOM_SIZE=$2; shift 2 ;;
    --blocks) BLOCKS=$2; shift 2 ;;
    --cache) CACHE=$2; shift 2 ;;
    --builds) BUILDS=$2; shift 2 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
read -r -a BUILD_DIRS <<<"$BUILDS"
# use_build N: the programs of the Nth build (0-based) of --builds.
use_build() {
  local dir=${BUILD_DIRS[$1]}
  [[ $dir = /* ]] || dir=$REPO/$dir
  TIPFS=$dir/cli/tipfs GEN=$dir/bench/workloads/tipfs-bench-gen
  AGREP=$dir/bench/workloads/tipfs-bench-agrep RANDOM_READER=$dir/bench/tip/tipfs-tip-random-reader
  export TIPSPEC_LIBRARY=$dir/speculate/libtipspec.so
  need "$TIPFS" "$GEN" "$AGREP" "$RANDOM_READER" "$TIPSPEC_LIBRARY"
}
for ((b = 0; b < ${#BUILD_DIRS[@]}; b++)); do use_build "$b"; done
use_build 0

# The cluster: ours (started here, stopped by the trap) or the caller's.
CLUSTER=""
if [[ -z $CONF ]]; then
  CLUSTER=$WORK/ceph
  # Four op threads: concurrent reads are what is measured (one, the tests' setting, serialises
  # them in the OSD: hinted agrep at L=2ms took 0.59 of the original with one, 0.42 with four).
  eval "$(CEPH_DEV_OP_THREADS=${CEPH_DEV_OP_THREADS:-4} "$REPO/scripts/ceph-dev.sh" start "$CLUSTER")"
  CONF=$TIPFS_CEPH_CONF POOL=$TIPFS_CEPH_POOL
fi
PREFIX=bench$$
NAMESPACES=("$PREFIX"-0 "$PREFIX"-1 "$PREFIX"-2 "$PREFIX"-3)
DISKS=()
for ns in "${NAMESPACES[@]}"; do DISKS+=("rados:$POOL/$ns?conf=$CONF"); done
META=$WORK/meta
mkdir -p "$META"
rados_cli() { rados -c "$CONF" -p "$POOL" "$@"; }
empty_namespaces() {
  local ns
  for ns in "${NAMESPACES[@]}"; do
    rados_cli -N "$ns" ls 2>/dev/null | while read -r obj; do rados_cli -N "$ns" rm "$obj"; done
  done
}
bench_cleanup() {
  if findmnt -n "$MNT" >/dev/null 2>&1; then "$TIPFS" umount "$MNT" || umount -l "$MNT"; fi
  empty_namespaces 2>/dev/null || true
  rados_cli cleanup --run-name "$PREFIX" >/dev/null 2>&1 || true
  [[ -z $CLUSTER ]] || "$REPO/scripts/ceph-dev.sh" stop "$CLUSTER" || true
  rm -rf "$WORK"
}
trap bench_cleanup EXIT

"$TIPFS" mkfs --meta "$META" "${DISKS[@]}" >/dev/null
model() { [[ $1 = 0 ]] && echo none || echo "none,L=$1"; }
# field KEY "LINE": the value of KEY=VALUE in a report line, without a trailing "s"
field() { tr ' ' '\n' <<<"$2" | awk -F= -v k="$1" '$1 == k {sub(/s$/, "", $2); print $2; exit}'; }
now() { date +%s.%N; }
elapsed_since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.3f", b - a}'; }
mount_cold() { unmount; sync; echo 3 >/proc/sys/vm/drop_caches; "$TIPFS" mount "$@" "$META" "$MNT"; }
col() {  # col CSV BUILD KEY1 KEY2 COLUMN: median of COLUMN over rows of BUILD whose next two match
  awk -F, -v n="$2" -v a="$3" -v b="$4" -v c="$5" \
    'NR > 1 && $1 == n && $2 == a && $3 == b {print $(c + 1)}' "$1" | median
}
# rados bench of OP ("seq" or "rand") over COUNT objects of SIZE bytes, 16 in flight: MB/s
rados_bench() {
  local op=$1 size=$2 count=$3 out
  rados_cli bench 60 write -b "$size" -t 16 --max-objects "$count" --no-cleanup \
    --run-name "$PREFIX" >/dev/null
  out=$(rados_cli bench 10 "$op" -t 16 --run-name "$PREFIX" 2>/dev/null)
  rados_cli cleanup --run-name "$PREFIX" >/dev/null 2>&1
  awk '/^Bandwidth \(MB\/sec\):/ {print $3}' <<<"$out"
}
mb() { awk -v b="$1" -v s="$2" 'BEGIN {printf "%.1f", b / s / 1e6}'; }

machine_note
for ((b = 0; b < ${#BUILD_DIRS[@]}; b++)); do
  echo "# build $b: ${BUILD_DIRS[$b]} ($(git -C "$(dirname "$(readlink -f "${BUILD_DIRS[$b]}")")" rev-parse --short HEAD 2>/dev/null || echo '?'))"
done
echo "# cluster: $CONF, pool $POOL$([[ -n $CLUSTER ]] && echo " (one-node memstore cluster of scripts/ceph-dev.sh)")"

NB=${#BUILD_DIRS[@]}
if [[ " $PARTS " = *" seq "* ]]; then
  CSV=$RESULTS/seq.csv
  echo "build,what,latency,repeat,mb_per_s" >"$CSV"
  "$TIPFS" mount "$META" "$MNT"
  head -c "$SEQ_SIZE" /dev/urandom >"$MNT/seq"
  bytes=$(stat -c %s "$MNT/seq")
  unmount
  for ((r = 0; r < REPEATS; r++)); do
    echo "-,rados_bench_seq,-,$r,$(rados_bench seq 4194304 64)" >>"$CSV"
    for l in $LATENCIES; do
      for ((k = 0; k < NB; k++)); do
        b=$(((k + r) % NB)); use_build "$b"
        mount_cold --cache-size "$CACHE" --disk-model "$(model "$l")"
        t=$(now)
        dd if="$MNT/seq" of=/dev/null bs=1M status=none
        echo "$b,tipfs,$l,$r,$(mb "$bytes" "$(elapsed_since "$t")")" >>"$CSV"
      done
    done
  done
  unmount
  echo
  printf 'sequential 1 MiB reads of a %s file, cold, medians of %d (MB/s, MB = 10^6 B)\n' "$SEQ_SIZE" "$REPEATS"
  base=$(col "$CSV" - rados_bench_seq - 4)
  printf '%-6s %-8s %10s %18s %8s\n' build L tipfs "rados bench seq" ratio
  for l in $LATENCIES; do
    for ((b = 0; b < NB; b++)); do
      v=$(col "$CSV" "$b" tipfs "$l" 4)
      printf '%-6s %-8s %10s %18s %8s\n' "$b" "$l" "$v" "$base" "$(ratio "$v" "$base")"
    done
  done
  echo "runs: $CSV"
fi

if [[ " $PARTS " = *" agrep "* ]]; then
  CSV=$RESULTS/agrep.csv
  echo "build,latency,variant,repeat,elapsed_s" >"$CSV"
  "$TIPFS" mount "$META" "$MNT"
  PATTERN=$("$GEN" agrep --dir "$MNT" --files "$FILES" --total "$TOTAL" 2>/dev/null | sed 's/.*pattern=//')
  unmount
  VARIANTS=(original manual speculating grep grep_speculating)
  run_variant() {  # run_variant VARIANT: prints its output to $WORK/out.VARIANT
    local v=$1
    case $v in
      original | manual)
        (cd "$MNT" && "$AGREP" --variant "$v" -p "$PATTERN" text 2>/dev/null) ;;
      speculating)
        (cd "$MNT" && "$TIPFS" run --mount "$MNT" -- "$AGREP" --variant original -p "$PATTERN" text 2>/dev/null) ;;
      grep) (cd "$MNT" && grep -r -- "$PATTERN" text | sort) ;;
      grep_speculating) (cd "$MNT" && "$TIPFS" run --mount "$MNT" -- grep -r -- "$PATTERN" text | sort) ;;
    esac
  }
  for ((r = 0; r < REPEATS; r++)); do
    for l in $LATENCIES; do
      for ((k = 0; k < ${#VARIANTS[@]}; k++)); do
        v=${VARIANTS[(k + r) % ${#VARIANTS[@]}]}
        for ((j = 0; j < NB; j++)); do
          b=$(((j + r + k) % NB)); use_build "$b"
          mount_cold --cache-size "$CACHE" --disk-model "$(model "$l")"
          t=$(now)
          run_variant "$v" >"$WORK/out.$v"
          echo "$b,$l,$v,$r,$(elapsed_since "$t")" >>"$CSV"
          # Every variant prints what its original prints.
          ref=$([[ $v = grep* ]] && echo grep || echo original)
          if [[ -f $WORK/out.$ref ]] && ! cmp -s "$WORK/out.$ref" "$WORK/out.$v"; then
            echo "agrep part: $v printed other lines than $ref" >&2; exit 1
          fi
        done
      done
    done
  done
  unmount
  echo
  printf 'agrep: %s files, %s; GNU grep -r over the same tree; cache %s, cold, medians of %d (s)\n' \
    "$FILES" "$TOTAL" "$CACHE" "$REPEATS"
  printf '%-6s %-6s %9s %8s %12s %9s %11s %16s %15s %14s\n' build L original manual speculating \
    "grep -r" "grep spec" "manual/original" "spec/original" "grep spec/grep"
  for l in $LATENCIES; do
    for ((b = 0; b < NB; b++)); do
      o=$(col "$CSV" "$b" "$l" original 4) m=$(col "$CSV" "$b" "$l" manual 4)
      s=$(col "$CSV" "$b" "$l" speculating 4)
      g=$(col "$CSV" "$b" "$l" grep 4) gs=$(col "$CSV" "$b" "$l" grep_speculating 4)
      printf '%-6s %-6s %9s %8s %12s %9s %11s %16s %15s %14s\n' "$b" "$l" "$o" "$m" "$s" "$g" \
        "$gs" "$(ratio "$m" "$o")" "$(ratio "$s" "$o")" "$(ratio "$gs" "$g")"
    done
  done
  echo "(goal with L=2ms: spec/original <= 0.35)"
  echo "runs: $CSV"
fi

if [[ " $PARTS " = *" random "* ]]; then
  CSV=$RESULTS/random.csv
  echo "build,what,latency,repeat,mb_per_s" >"$CSV"
  "$TIPFS" mount "$META" "$MNT"
  head -c "$RANDOM_SIZE" /dev/urandom >"$MNT/big"
  unmount
  for ((r = 0; r < REPEATS; r++)); do
    echo "-,rados_bench_rand_64k,-,$r,$(rados_bench rand 65536 2048)" >>"$CSV"
    for l in $LATENCIES; do
      for ((k = 0; k < NB; k++)); do
        b=$(((k + r) % NB)); use_build "$b"
        mount_cold --cache-size "$CACHE" --disk-model "$(model "$l")" --data-cache direct
        report=$("$RANDOM_READER" --file "$MNT/big" --blocks "$BLOCKS" --seed $((r + 1)) --hints on)
        echo "$b,tipfs_hinted,$l,$r,$(field mb_per_s "$report")" >>"$CSV"
      done
    done
  done
  unmount
  echo
  printf 'random 64 KiB reads of a %s file, %s blocks, hinted, cold, medians of %d (MB/s)\n' \
    "$RANDOM_SIZE" "$BLOCKS" "$REPEATS"
  base=$(col "$CSV" - rados_bench_rand_64k - 4)
  printf '%-6s %-8s %12s %28s %8s\n' build L "tipfs hinted" "rados bench rand 64K x16" ratio
  for l in $LATENCIES; do
    for ((b = 0; b < NB; b++)); do
      v=$(col "$CSV" "$b" tipfs_hinted "$l" 4)
      printf '%-6s %-8s %12s %28s %8s\n' "$b" "$l" "$v" "$base" "$(ratio "$v" "$base")"
    done
  done
  echo "runs: $CSV"
fi
