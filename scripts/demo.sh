#!/usr/bin/env bash
# The tipfs demo: what informed prefetching does for a program on slow disks, in a few minutes.
# Installs and builds (scripts/setup.sh), makes a 4-disk volume with emulated 15 ms disks (the
# papers' HP C2247) and a 12 MiB cache, writes a tree of text files, then searches it cold three
# times:
#   1. GNU grep -r, unmodified                           (tipfs run --no-speculation)
#   2. the same grep under `tipfs run`                   (hints from a speculating copy of it)
#   3. a search program that discloses its files first   (manual hints, tipfs_hint(3))
# It checks that all three find exactly the same lines, prints the times and the ratios, and
# writes a picture of each run (one row per disk: when it worked and for what). Leaves nothing
# mounted, also when a step fails.
#   DEMO_FILES (default 600) and DEMO_TOTAL (default 8M) size the tree; DEMO_OUT (default
#   ./demo-timelines) is where the pictures go.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
BUILD=${BUILD_DIR:-build}
TIPFS=$PWD/$BUILD/cli/tipfs
GEN=$PWD/$BUILD/bench/workloads/tipfs-bench-gen
AGREP=$PWD/$BUILD/bench/workloads/tipfs-bench-agrep
OUT=$(realpath -m "${DEMO_OUT:-demo-timelines}")
FILES=${DEMO_FILES:-600}
TOTAL=${DEMO_TOTAL:-8M}

WORK=$(mktemp -d /tmp/tipfs-demo-XXXXXX)
MNT=$WORK/mnt
cleanup() {
  if findmnt -n "$MNT" >/dev/null 2>&1; then
    "$TIPFS" umount "$MNT" 2>/dev/null || "$TIPFS" umount --lazy "$MNT" || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$WORK"/disk{0,1,2,3} "$MNT" "$OUT"
step() { printf '\n== %s\n' "$*"; }
cold_mount() {  # a fresh daemon on an empty page cache
  if findmnt -n "$MNT" >/dev/null 2>&1; then "$TIPFS" umount "$MNT"; fi
  sync
  echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
  "$TIPFS" mount --disk-model hp-c2247 --cache-size 12M "$WORK/disk0" "$MNT"
}
seconds_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.2f", b - a}'; }

step "a volume over 4 directories, 64 KiB stripe units"
"$TIPFS" mkfs "$WORK"/disk{0,1,2,3}
"$TIPFS" mount "$WORK/disk0" "$MNT"  # no disk model while writing: full speed
PATTERN=$("$GEN" agrep --dir "$MNT" --files "$FILES" --total "$TOTAL" 2>/dev/null | sed 's/.*pattern=//')
printf '%s files, %s in %s/text; searching for "%s"\n' "$(find "$MNT/text" -type f | wc -l)" \
  "$(du -sh --apparent-size "$MNT/text" | cut -f1)" "$MNT" "$PATTERN"

# Each search prints "file:line:text" lines, sorted, so the three can be compared byte for byte.
search() {  # search NAME SVG-NAME RUN-PREFIX...: one cold, timed, drawn search; sets SECONDS_<NAME>
  local name=$1 svg=$OUT/$2
  shift 2
  cold_mount
  local start=$EPOCHREALTIME
  (cd "$MNT/text" && "$@") 2>"$WORK/$name.err" | sed -e 's|^\./||' -e '/^agrep: files=/d' |
    LC_ALL=C sort >"$WORK/$name.out" ||
    { echo "the $name search failed: $(tail -3 "$WORK/$name.err")" >&2; exit 1; }
  local took
  took=$(seconds_since "$start")
  printf -v "SECONDS_$name" '%s' "$took"
  printf '%-12s %6s s   %s lines   picture: %s\n' "$name" "$took" "$(wc -l <"$WORK/$name.out")" "$svg"
  grep -h '^tipfs run: timeline' "$WORK/$name.err" | sed 's/^tipfs run: timeline [^:]*: /             /'
}

step "searching cold: GNU grep without hints, with tipfs run, and a program with manual hints"
search original grep-original.svg \
  "$TIPFS" run --no-speculation --timeline "$OUT/grep-original.svg" -- grep -rnF "$PATTERN" .
search speculating grep-tipfs-run.svg \
  "$TIPFS" run --timeline "$OUT/grep-tipfs-run.svg" -- grep -rnF "$PATTERN" .
search manual manual-hints.svg \
  "$TIPFS" run --no-speculation --timeline "$OUT/manual-hints.svg" -- \
  "$AGREP" --variant manual --errors 0 -p "$PATTERN" .

step "the three found the same lines"
for v in speculating manual; do
  if ! cmp -s "$WORK/original.out" "$WORK/$v.out"; then
    echo "MISMATCH: the $v search found other lines than grep:" >&2
    diff "$WORK/original.out" "$WORK/$v.out" | head >&2
    exit 1
  fi
done
echo "identical: $(wc -l <"$WORK/original.out") matching lines in each"

step "what it did for the program"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
printf 'grep -r                    %6s s\n' "$SECONDS_original"
printf 'grep -r under tipfs run    %6s s   %s of the time\n' "$SECONDS_speculating" \
  "$(ratio "$SECONDS_speculating" "$SECONDS_original")"
printf 'manual hints               %6s s   %s of the time\n' "$SECONDS_manual" \
  "$(ratio "$SECONDS_manual" "$SECONDS_original")"
echo "(4 emulated 15 ms disks, 12 MiB cache, cold; machine load $(cut -d' ' -f1 /proc/loadavg))"
echo "The pictures show the disks: one at a time for grep alone, all four at once with hints."
echo "Counters of the last run: tipfs stats $MNT (printed below)"
"$TIPFS" stats "$MNT" | sed -n '1,12p'

"$TIPFS" umount "$MNT"
echo
echo "done: nothing left mounted; pictures in $OUT"
