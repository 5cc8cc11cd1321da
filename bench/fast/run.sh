#!/usr/bin/env bash
# Fast storage benchmark (issue 11): the daemon's own costs on SSD and NVMe arrays.
#
# Every row runs in both data-cache modes on a 4-disk volume (64 KiB stripe unit) and, with
# --before BUILD, for two builds side by side: the repeats alternate between the builds, so both
# see the same machine. Each cell is the median of --repeats runs.
#
#   ssd-rand-1     fio psync 4 KiB random reads of a 1 GiB file, 1 job, --disk-model ssd,
#                  --readahead off --cache-size 32M (reads miss): IOPS / the model's limit
#                  1 / (access + 4 KiB / bandwidth)
#   ssd-rand-32    the same with 32 jobs: IOPS / 4 disks x that limit
#   nvme-rand-1    as ssd-rand-1 on --disk-model nvme
#   nvme-rand-32   as ssd-rand-32 on --disk-model nvme; in direct mode with a "null-fuse" line as
#                  warm-rand-16's (the same fio, 32 jobs, on tipfs-null-fuse: what FUSE allows)
#                  (each random-read run, warm-rand-16's too, also prints the daemon's CPU per
#                  read on stderr)
#   nvme-seq       fio 1 MiB sequential reads, 1 job, fresh daemon (empty cache), readahead on:
#                  MB/s / 4 disks x the model's bandwidth
#   warm-rand-16   fio 4 KiB random reads, 16 jobs, every byte in the daemon's cache (and, in
#                  kernel mode, in the page cache): IOPS / the same fio on the backing file system.
#                  fio --invalidate=0: by default each job's open drops the file's page cache
#                  (POSIX_FADV_DONTNEED), so kernel mode measured page-cache misses (tmpfs, the
#                  reference, ignores it)
#   churn          create + stat + unlink of --files files (metadata_churn): native s / tipfs s
#   cpu-per-gib    daemon CPU seconds (user + sys) per GiB read sequentially (dd, 1 MiB reads)
#                  with every block in the daemon's cache; in kernel mode the page cache is dropped
#                  first so the reads reach the daemon
#   agrep-spec     bench/spec/run_search.sh's agrep workload on hp-c2247, speculating / original
#                  (kernel mode only; the issue's bound: <= 0.27)
#   small-writes   fio psync 4 KiB random writes, 1 job, into the first 64 MiB of the file with
#                  every block of it in the daemon's cache (read first), no disk model: write IOPS
#                  (direct mode only: in kernel mode the page cache gathers the writes)
#   small-writes-cpu  the same run, daemon CPU microseconds (user + sys) per write
#   seq-writes     fio 1 MiB sequential writes of --size bytes into a new file, its fdatasync at
#                  the end included, no disk model: MB/s / the same fio on the backing file system
#                  (direct mode only)
#   seq-writes-cpu the same run, daemon CPU seconds (user + sys) per GiB written
#
# In kernel mode the random-read rows open with O_DIRECT (fio --direct=1) so that every read
# reaches the daemon, as --data-cache direct makes it; otherwise the kernel's page cache serves
# them and the row measures nothing of the daemon. The backing files stay in the host's page
# cache (the emulated disk is the disk; the real one would time only itself).
#
# Usage: bench/fast/run.sh [--before BUILD_DIR] [--rows "ssd-rand-1 ..."] [--modes "direct kernel"]
#          [--repeats 3] [--runtime 10] [--size 1G] [--files 10000]
#          [--after-mount-args "ARGS"] [--before-mount-args "ARGS"]
#   BUILD_DIR (environment) is the build measured ("after"); --before adds a second one (it may be
#   the same build: --before "$BUILD_DIR" --after-mount-args "--fuse-io-uring on" compares two
#   ways of mounting it). The mount args go to every mount of that side.
# Writes every run to bench/results/fast/runs.csv and the table to bench/results/fast/table.txt.
set -euo pipefail
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
ROWS="ssd-rand-1 ssd-rand-32 nvme-rand-1 nvme-rand-32 nvme-seq warm-rand-16 churn cpu-per-gib agrep-spec small-writes small-writes-cpu"
MODES="direct kernel" REPEATS=3 RUNTIME=10 SIZE=1G FILES=10000 BEFORE=""
declare -A MOUNT_ARGS=([before]="" [after]="")
while (($#)); do
  case $1 in
    --help | -h) usage; exit 0 ;;
    --before) BEFORE=$2; shift 2 ;;
    --rows) ROWS=$2; shift 2 ;;
    --modes) MODES=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --runtime) RUNTIME=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    --files) FILES=$2; shift 2 ;;
    --after-mount-args) MOUNT_ARGS[after]=$2; shift 2 ;;
    --before-mount-args) MOUNT_ARGS[before]=$2; shift 2 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
BENCH_NAME=fast
source "$(dirname "$0")/../lib/scratch_volume.sh"
command -v fio >/dev/null || { echo "fio is missing: scripts/setup.sh installs it" >&2; exit 1; }
CHURN=$BUILD/bench/foundation/metadata_churn
NULL_FUSE=$BUILD/bench/fast/tipfs-null-fuse
need "$CHURN" "$NULL_FUSE"
declare -A BIN=([after]=$TIPFS)
BUILDS=(after)
if [[ -n $BEFORE ]]; then
  [[ $BEFORE = /* ]] || BEFORE=$REPO/$BEFORE
  BIN[before]=$BEFORE/cli/tipfs
  need "${BIN[before]}"
  BUILDS=(before after)
fi
NATIVE=$WORK/native
mkdir -p "$NATIVE"
CSV=$RESULTS/runs.csv
[[ -s $CSV ]] || echo "utc,build,row,mode,repeat,value,unit" > "$CSV"

# The model's limits, from the profiles in stripe/emulation/disk_model_config.cc.
iops_limit() {  # iops_limit ACCESS_S BYTES_PER_S DISKS
  awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN {printf "%.0f\n", n / (a + 4096 / b)}'
}
SSD_IOPS=$(iops_limit 90e-6 560e6 1)
NVME_IOPS=$(iops_limit 20e-6 3e9 1)
NVME_SEQ_MBPS=$(awk 'BEGIN {print 4 * 3e9 / 1e6}')

"${BIN[after]}" mkfs "${DISKS[@]}" >/dev/null
# mount_with BUILD MODE ARGS...: a fresh daemon of BUILD on the scratch volume
mount_with() {
  local build=$1 mode=$2
  shift 2
  unmount
  # shellcheck disable=SC2086 # the side's mount args are words
  "${BIN[$build]}" mount --data-cache "$mode" ${MOUNT_ARGS[$build]} "$@" "${DISKS[0]}" "$MNT"
}
unmount() {  # any build's tipfs can unmount any mount
  if findmnt -n "$MNT" >/dev/null 2>&1; then "$TIPFS" umount "$MNT"; fi
}
mount_with after direct --cache-size 64M
head -c "$SIZE" /dev/urandom > "$NATIVE/file"
cp "$NATIVE/file" "$MNT/file"
unmount
sync
# The backing objects and the native file in the page cache, for every row.
warm_backing() { cat "${DISKS[@]/%//objects}"/*/* "$NATIVE/file" > /dev/null 2>&1 || true; }
warm_backing

# fio_value JSON-KEY FIO-ARGS...: IOPS or MB/s of one fio run's reads; write-iops: IOPS and the
# number of writes of its writes ("IOPS COUNT")
fio_value() {
  local key=$1
  shift
  fio --name=bench --group_reporting --output-format=json "$@" 2>/dev/null |
    python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]; r=j['read']; w=j['write']
if '$key' == 'write-iops': print(round(w['iops'], 1), w['total_ios'])
else: print(round(r['iops'] if '$key' == 'iops' else r['bw_bytes'] / 1e6, 1))"
}
rand_fio() {  # rand_fio MODE JOBS FILE
  local direct=0
  [[ $1 = kernel ]] && direct=1
  fio_value iops --filename="$3" --rw=randread --bs=4k --ioengine=psync --numjobs="$2" \
    --direct="$direct" --runtime="$RUNTIME" --time_based --norandommap
}
daemon_cpu() {
  awk -v hz="$(getconf CLK_TCK)" '{sub(/^.*\) /, ""); print ($12 + $13) / hz}' \
    "/proc/$(cat "${DISKS[0]}/tipfs.pid")/stat"
}

# cpu_per_read BUILD ROW CPU0 IOPS: the daemon's CPU (user + sys) per read over the run's reads
# (IOPS x runtime), on stderr
cpu_per_read() {
  awk -v a="$(daemon_cpu)" -v b="$3" -v n="$4" -v t="$RUNTIME" -v r="$2" -v bd="$1" \
    'BEGIN {printf "  %s %s: daemon CPU %.1f us per read\n", r, bd, (a - b) / (n * t) * 1e6}' >&2
}

# run_row BUILD ROW MODE: prints "value unit" (or nothing when the row does not apply)
run_row() {
  local build=$1 row=$2 mode=$3
  case $row in
    ssd-rand-* | nvme-rand-*)
      local model=${row%%-*} jobs=${row##*-}
      mount_with "$build" "$mode" --readahead off --cache-size 32M --disk-model "$model"
      local cpu0 iops
      cpu0=$(daemon_cpu)
      iops=$(rand_fio "$mode" "$jobs" "$MNT/file")
      cpu_per_read "$build" "$row" "$cpu0" "$iops"
      echo "$iops iops" ;;
    nvme-seq)
      mount_with "$build" "$mode" --cache-size 32M --disk-model nvme
      local direct=0
      [[ $mode = kernel ]] && { sync; echo 1 > /proc/sys/vm/drop_caches; warm_backing; }
      echo "$(fio_value mbps --filename="$MNT/file" --rw=read --bs=1M --ioengine=psync \
        --direct="$direct") MB/s" ;;
    warm-rand-16)
      mount_with "$build" "$mode" --cache-size 2G
      cat "$MNT/file" > /dev/null
      local direct=0 cpu0 iops
      cpu0=$(daemon_cpu)
      iops=$(fio_value iops --filename="$MNT/file" --rw=randread --bs=4k --ioengine=psync \
        --numjobs=16 --direct="$direct" --runtime="$RUNTIME" --time_based --norandommap \
        --invalidate=0)
      cpu_per_read "$build" "$row" "$cpu0" "$iops"
      echo "$iops iops" ;;
    churn)
      mount_with "$build" "$mode" --cache-size 64M
      mkdir -p "$MNT/churn"
      echo "$("$CHURN" "$MNT/churn" "$FILES") s"
      rmdir "$MNT/churn" ;;
    cpu-per-gib)
      mount_with "$build" "$mode" --cache-size 2G
      cat "$MNT/file" > /dev/null
      [[ $mode = kernel ]] && { sync; echo 1 > /proc/sys/vm/drop_caches; warm_backing; }
      local before after bytes
      before=$(daemon_cpu)
      dd if="$MNT/file" of=/dev/null bs=1M status=none
      after=$(daemon_cpu)
      bytes=$(stat -c %s "$NATIVE/file")
      echo "$(awk -v a="$after" -v b="$before" -v n="$bytes" 'BEGIN {printf "%.3f", (a - b) / (n / 2^30)}') s/GiB" ;;
    agrep-spec)
      [[ $mode = kernel ]] || return 0
      unmount
      local out
      out=$(BUILD_DIR=$(dirname "$(dirname "${BIN[$build]}")") \
        "$REPO/bench/spec/run_search.sh" --profiles hp-c2247 --programs agrep --repeats 1 2>&1)
      echo "$(awk '$1 == "hp-c2247" && $2 == "agrep" {sub(/\(.*/, "", $7); print $7}' <<< "$out" |
        tail -1) ratio" ;;
    small-writes | small-writes-cpu)
      [[ $mode = direct ]] || return 0
      mount_with "$build" "$mode" --cache-size 256M
      dd if="$MNT/file" of=/dev/null bs=1M count=64 status=none  # the blocks written are cached
      local before after result
      before=$(daemon_cpu)
      result=$(fio_value write-iops --filename="$MNT/file" --rw=randwrite --bs=4k --size=64M \
        --ioengine=psync --numjobs=1 --runtime="$RUNTIME" --time_based --norandommap)
      after=$(daemon_cpu)
      if [[ $row = small-writes ]]; then
        echo "${result% *} iops"
      else
        echo "$(awk -v a="$after" -v b="$before" -v n="${result#* }" 'BEGIN {printf "%.2f", (a - b) / n * 1e6}') us/write"
      fi ;;
    seq-writes | seq-writes-cpu)
      [[ $mode = direct ]] || return 0
      mount_with "$build" "$mode" --cache-size 256M
      local before after mbps
      before=$(daemon_cpu)
      mbps=$(seq_write_fio "$MNT/written")
      after=$(daemon_cpu)
      rm -f "$MNT/written"
      if [[ $row = seq-writes ]]; then
        echo "$mbps MB/s"
      else
        echo "$(awk -v a="$after" -v b="$before" -v n="$(stat -c %s "$NATIVE/file")" 'BEGIN {printf "%.3f", (a - b) / (n / 2^30)}') s/GiB"
      fi ;;
    *) echo "unknown row $row (see --help)" >&2; exit 2 ;;
  esac
}

# seq_write_fio FILE: MB/s of 1 MiB sequential writes of --size bytes to a new FILE, its
# fdatasync at the end included
seq_write_fio() {
  rm -f "$1"
  fio --name=bench --group_reporting --output-format=json --filename="$1" --rw=write --bs=1M \
    --size="$SIZE" --ioengine=psync --numjobs=1 --end_fsync=1 2>/dev/null |
    python3 -c "import json,sys; w=json.load(sys.stdin)['jobs'][0]['write']; print(round(w['bw_bytes'] / 1e6, 1))"
  rm -f "$1"
}

# The native references: the same fio or churn on the backing file system.
native_value() {  # native_value ROW MODE
  case $1 in
    seq-writes) seq_write_fio "$NATIVE/written" ;;
    warm-rand-16)
      fio_value iops --filename="$NATIVE/file" --rw=randread --bs=4k --ioengine=psync \
        --numjobs=16 --runtime="$RUNTIME" --time_based --norandommap --invalidate=0 ;;
    churn)
      mkdir -p "$NATIVE/churn"
      "$CHURN" "$NATIVE/churn" "$FILES"
      rmdir "$NATIVE/churn" ;;
  esac
}

# null_value JOBS: IOPS of rand_fio's direct-mode run on tipfs-null-fuse (a file of --size
# bytes served from memory), mounted at $MNT for the run and unmounted after it.
null_value() {
  unmount
  "$NULL_FUSE" --size "$SIZE" "$MNT" &
  local pid=$! tries
  for ((tries = 0; tries < 100; tries++)); do
    [[ $(findmnt -n -o FSTYPE "$MNT" 2>/dev/null) = fuse.tipfs-null ]] && break
    sleep 0.1
  done
  rand_fio direct "$1" "$MNT/file" || true
  umount "$MNT" || umount -l "$MNT"
  wait "$pid" || true
}
# The rows that get a null-fuse line, and their fio jobs (direct mode only).
declare -A NULL_JOBS=([warm-rand-16]=16 [nvme-rand-32]=32)

declare -A VALUES NATIVE_VALUES NULL_VALUES UNIT
machine_note | tee "$RESULTS/table.txt"
for ((r = 1; r <= REPEATS; r++)); do
  for row in $ROWS; do
    for mode in $MODES; do
      for build in "${BUILDS[@]}"; do
        line=$(run_row "$build" "$row" "$mode")
        [[ -n $line ]] || continue
        value=${line%% *} UNIT[$row]=${line#* }
        VALUES[$build.$row.$mode]+="$value "
        echo "$(date -u +%FT%TZ),$build,$row,$mode,$r,$value,${UNIT[$row]}" >> "$CSV"
        printf '  repeat %d  %-13s %-6s %-6s %10s %s\n' "$r" "$row" "$mode" "$build" "$value" "${UNIT[$row]}" >&2
      done
      case $row in
        warm-rand-16 | churn | seq-writes)
          [[ $row = seq-writes && $mode != direct ]] && continue
          unmount
          NATIVE_VALUES[$row.$mode]+="$(native_value "$row" "$mode") " ;;
      esac
      if [[ $mode = direct && -n ${NULL_JOBS[$row]:-} ]]; then
        value=$(null_value "${NULL_JOBS[$row]}")
        NULL_VALUES[$row]+="$value "
        echo "$(date -u +%FT%TZ),null-fuse,$row,$mode,$r,$value,iops" >> "$CSV"
        printf '  repeat %d  %-13s %-6s %-6s %10s %s\n' "$r" "$row" "$mode" "null" "$value" iops >&2
      fi
    done
  done
done
unmount

# reference ROW MODE: what a cell is divided by (or divides, for times), and how
reference() {
  case $1 in
    ssd-rand-1) echo "$SSD_IOPS" ;;
    ssd-rand-32) echo $((4 * SSD_IOPS)) ;;
    nvme-rand-1) echo "$NVME_IOPS" ;;
    nvme-rand-32) echo $((4 * NVME_IOPS)) ;;
    nvme-seq) echo "$NVME_SEQ_MBPS" ;;
    warm-rand-16 | churn | seq-writes) tr ' ' '\n' <<< "${NATIVE_VALUES[$1.$2]:-}" | grep . | median ;;
    *) echo "-" ;;
  esac
}
goal() {
  case $1 in
    ssd-rand-1) echo ">= 0.75" ;; ssd-rand-32) echo ">= 0.85" ;; nvme-rand-32) echo ">= 0.6" ;;
    warm-rand-16) echo ">= 0.40" ;; churn) echo ">= 0.85" ;; cpu-per-gib) echo "halve" ;;
    agrep-spec) echo "<= 0.27" ;; *) echo "(measure)" ;;
  esac
}
{
  echo
  printf 'fast storage: 4 disks, %s file, medians of %d, fio runs of %s s\n' "$SIZE" "$REPEATS" "$RUNTIME"
  if [[ ${#BUILDS[@]} = 2 ]]; then
    printf '%-13s %-6s %12s %12s %12s %8s %8s %9s\n' row mode before after reference \
      "before/r" "after/r" goal
  else
    printf '%-13s %-6s %12s %12s %12s %8s %8s %9s\n' row mode "" after reference "" "after/r" goal
  fi
  for row in $ROWS; do
    for mode in $MODES; do
      [[ -n ${VALUES[after.$row.$mode]:-} ]] || continue
      ref=$(reference "$row" "$mode")
      cells=() ratios=()
      for build in "${BUILDS[@]}"; do
        v=$(tr ' ' '\n' <<< "${VALUES[$build.$row.$mode]}" | grep . | median)
        cells+=("$v")
        case $row in
          churn) ratios+=("$(ratio "$ref" "$v")") ;;
          cpu-per-gib | agrep-spec | small-writes*) ratios+=("-") ;;
          *) ratios+=("$(ratio "$v" "$ref")") ;;
        esac
      done
      [[ ${#BUILDS[@]} = 1 ]] && { cells=("-" "${cells[0]}"); ratios=("-" "${ratios[0]}"); }
      printf '%-13s %-6s %12s %12s %12s %8s %8s %9s  %s\n' "$row" "$mode" "${cells[0]}" \
        "${cells[1]}" "$ref" "${ratios[0]}" "${ratios[1]}" "$(goal "$row")" "${UNIT[$row]}"
      if [[ $mode = direct && -n ${NULL_VALUES[$row]:-} ]]; then
        # The same cells divided by the null file system's IOPS; its own cell: null / reference.
        null=$(tr ' ' '\n' <<< "${NULL_VALUES[$row]}" | grep . | median)
        nulls=()
        for v in "${cells[@]}"; do nulls+=("$(ratio "$v" "$null")"); done
        [[ ${#BUILDS[@]} = 1 ]] && nulls[0]="-"
        printf '%-13s %-6s %12s %12s %12s %8s %8s %9s  %s\n' "  null-fuse" "" "" "" "$null" \
          "${nulls[0]}" "${nulls[1]}" "$(ratio "$null" "$ref")" "null-fuse IOPS; null / reference"
      fi
    done
  done
  echo "ratio: value / reference (churn: reference / value; higher is better). reference: the"
  echo "model's limit (rand, seq rows) or the same fio / churn on the backing file system."
  echo "null-fuse lines: the row's cells / the same fio on tipfs-null-fuse (the FUSE ceiling); in"
  echo "the goal column, null-fuse / the row's reference."
} | tee -a "$RESULTS/table.txt"
