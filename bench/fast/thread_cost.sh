#!/usr/bin/env bash
# thread_cost.sh: where the daemon's CPU and context switches go per read, thread by thread, during
# a fio run of 4 KiB random reads (as run.sh's ssd-rand-* and nvme-rand-* rows, which print only
# the daemon's whole CPU per read). Reads each daemon thread's CPU (utime + stime) and voluntary
# and involuntary context switches from /proc before and after the run; a thread started during
# the run (the clock's timer thread starts with the first emulated timer) counts whole.
#
# Usage: sudo bench/fast/thread_cost.sh [--model nvme] [--jobs 32] [--runtime 6] [--size 1G]
#          [--mount-args "ARGS"] [--threads]
#   BUILD_DIR (environment, default build) is the build measured. The volume (4 disks) and its file
#   live under TIPFS_BENCH_TMP (default /dev/shm/tipfs-thread-cost) and are kept for the next run.
#   The mount is `--data-cache direct --readahead off --cache-size 32M --disk-model MODEL` plus
#   ARGS (e.g. "--fuse-io-uring on"). --threads prints one line per thread, named by comm and tid.
# Prints: reads, IOPS, and per read the daemon's voluntary and involuntary switches and CPU (us).
set -euo pipefail
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
MODEL=nvme JOBS=32 RUNTIME=6 SIZE=1G MOUNT_ARGS="" THREADS=0
while (($#)); do
  case $1 in
    --help | -h) usage; exit 0 ;;
    --model) MODEL=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --runtime) RUNTIME=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    --mount-args) MOUNT_ARGS=$2; shift 2 ;;
    --threads) THREADS=1; shift ;;
    *) echo "thread_cost.sh: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
  esac
done
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-build}
[[ $BUILD_DIR = /* ]] || BUILD_DIR=$REPO/$BUILD_DIR
TIPFS=$BUILD_DIR/cli/tipfs
[[ -x $TIPFS ]] || { echo "thread_cost.sh: no tipfs at $TIPFS: build first" >&2; exit 1; }
command -v fio >/dev/null || { echo "thread_cost.sh: fio is missing: scripts/setup.sh installs it" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || { echo "thread_cost.sh: run as root (it mounts)" >&2; exit 1; }

WORK=${TIPFS_BENCH_TMP:-/dev/shm/tipfs-thread-cost}
DISKS=("$WORK"/disk{0,1,2,3})
MNT=$WORK/mnt
mkdir -p "$MNT"
unmount() { if findmnt -n "$MNT" >/dev/null 2>&1; then "$TIPFS" umount "$MNT"; fi; }
trap unmount EXIT
if [[ ! -s $WORK/size || $(cat "$WORK/size") != "$SIZE" ]]; then
  rm -rf "${DISKS[@]}"
  mkdir -p "${DISKS[@]}"
  "$TIPFS" mkfs "${DISKS[@]}" >/dev/null
  "$TIPFS" mount --data-cache direct --cache-size 64M "${DISKS[0]}" "$MNT"
  head -c "$SIZE" /dev/urandom > "$MNT/file"
  unmount
  echo "$SIZE" > "$WORK/size"
fi

# shellcheck disable=SC2086 # the mount args are words
"$TIPFS" mount --data-cache direct --readahead off --cache-size 32M --disk-model "$MODEL" \
  $MOUNT_ARGS "${DISKS[0]}" "$MNT"
PID=$(cat "${DISKS[0]}/tipfs.pid")
# snapshot: "tid comm voluntary involuntary cpu_ticks" per daemon thread
snapshot() {
  local t
  for t in /proc/"$PID"/task/*; do
    awk -v tid="${t##*/}" -v comm="$(cat "$t/comm")" \
      '/^voluntary_ctxt_switches/ {v = $2} /^nonvoluntary_ctxt_switches/ {n = $2}
       END {printf "%s %s %d %d ", tid, comm, v, n}' "$t/status"
    awk '{sub(/^.*\) /, ""); print $12 + $13}' "$t/stat"
  done
}
snapshot > "$WORK/before"
fio --name=cost --filename="$MNT/file" --rw=randread --bs=4k --ioengine=psync --numjobs="$JOBS" \
  --runtime="$RUNTIME" --time_based --norandommap --group_reporting --output-format=json \
  > "$WORK/fio.json"
snapshot > "$WORK/after"
READS=$(python3 -c "import json; print(json.load(open('$WORK/fio.json'))['jobs'][0]['read']['total_ios'])")
echo "model $MODEL, $JOBS jobs: $READS reads, $((READS / RUNTIME)) IOPS"
awk -v reads="$READS" -v hz="$(getconf CLK_TCK)" -v threads="$THREADS" '
  NR == FNR {v0[$1] = $3; n0[$1] = $4; c0[$1] = $5; next}
  {
    v = $3 - v0[$1]; n = $4 - n0[$1]; c = $5 - c0[$1]
    if (threads && (v + n + c) > 0)
      printf "  %-16s %7s  voluntary %.3f  involuntary %.3f  cpu %.2f us per read\n", $2, $1,
             v / reads, n / reads, c / hz / reads * 1e6
    tv += v; tn += n; tc += c
  }
  END {printf "daemon: voluntary %.3f  involuntary %.3f  cpu %.2f us per read\n",
              tv / reads, tn / reads, tc / hz / reads * 1e6}' "$WORK/before" "$WORK/after"
