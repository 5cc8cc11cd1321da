#!/usr/bin/env bash
# CPU the daemon uses while its emulated disks keep it waiting (issue 3: "near zero"). A cold read
# of many small files through a slow profile (hp-c2247 by default: ~20 ms a file) leaves the daemon
# idle most of the time: a waiting request is a timer, never a spin. Measured: the daemon's CPU
# seconds (user + system, all threads, from /proc/PID/stat; PID from <disk0>/tipfs.pid) over the
# wall seconds of the read, for
#   idle        the mounted daemon with nothing to do, for --idle-seconds;
#   none        the same read without a model (real timing): the CPU the work itself costs;
#   MODEL       the read through the model: should cost the same CPU as `none`, spread over far
#               more wall time, so CPU / wall is near zero;
#   MODEL,o=O   with the LogGP overhead o: each disk request burns O of CPU in the daemon, as
#               designed, so CPU / wall rises by about requests x O / wall (printed as "o share").
# Every run drops the page cache and mounts afresh; the table shows medians of --repeats, the
# configurations run side by side in each repeat. /proc/PID/stat counts in clock ticks (10 ms at
# USER_HZ 100): runs of several seconds keep that below a few tenths of a percent.
#
# Usage: bench/emulation/idle_cpu.sh [--model hp-c2247] [--files 300] [--overhead 1ms]
#          [--disks 4] [--repeats 3] [--idle-seconds 5]
# Output: a table, bench/results/emulation/idle_cpu.{csv,txt}.
# shellcheck source=bench/emulation/common.sh
source "$(dirname "$0")/common.sh"

MODEL=hp-c2247 FILES=300 OVERHEAD=1ms DISKS=4 REPEATS=3 IDLE_SECONDS=5
while (($#)); do
  case $1 in
    --model) MODEL=$2; shift 2 ;;
    --files) FILES=$2; shift 2 ;;
    --overhead) OVERHEAD=$2; shift 2 ;;
    --disks) DISKS=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --idle-seconds) IDLE_SECONDS=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
HZ=$(getconf CLK_TCK)
CONFIGS=(none "$MODEL" "$MODEL,o=$OVERHEAD")

make_volume idle "$DISKS"
mount_volume idle
MP=$(mountpoint_of idle)
write_small_files "$MP/small" "$FILES" 2 > /dev/null
unmount_volume idle
for spec in "${CONFIGS[@]}"; do  # a bad spec fails here, before any measurement
  mount_volume idle --disk-model "$spec"
  unmount_volume idle
done

# measure LABEL SPEC: one cold run; appends "label wall cpu reads overhead_s" to $RAW.
measure() {
  local label=$1 spec=$2 pid c0 c1 t0 t1 stats
  cold_mount idle --disk-model "$spec"
  pid=$(daemon_pid idle)
  c0=$(cpu_ticks "$pid")
  t0=$(now_ns)
  if [[ $label == idle ]]; then
    sleep "$IDLE_SECONDS"
  else
    cat "$MP"/small/f* > /dev/null
  fi
  t1=$(now_ns)
  c1=$(cpu_ticks "$pid")
  stats=$(cat "$MP/.tipfs/stats.json")
  echo "$label $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f", (b - a) / 1e9}') \
$(awk -v a="$c0" -v b="$c1" -v hz="$HZ" 'BEGIN {printf "%.3f", (b - a) / hz}') \
$(jq '."fuse.read.ops"' <<< "$stats") $(jq '[.disks[].overhead_seconds_total] | add // 0' <<< "$stats")" >> "$RAW"
  tail -1 "$RAW" | awk '{printf "  %-28s wall %7.3f s, daemon CPU %6.3f s (%5.2f%%)\n", $1, $2, $3,
    100 * $3 / $2}' >&2
  unmount_volume idle
}

RAW=$WORK/raw
: > "$RAW"
for ((r = 0; r < REPEATS; r++)); do
  measure idle "$MODEL"
  for spec in "${CONFIGS[@]}"; do measure "$spec" "$spec"; done
done

CSV=$RESULTS/idle_cpu.csv
TXT=$RESULTS/idle_cpu.txt
{
  echo "wall_seconds,daemon_cpu_seconds,cpu_share,cpu_ms_per_read,fuse_reads,o_share,runs,run"
  for label in idle "${CONFIGS[@]}"; do
    rows=$(awk -v l="$label" '$1 == l' "$RAW")
    wall=$(awk '{print $2}' <<< "$rows" | median)
    cpu=$(awk '{print $3}' <<< "$rows" | median)
    share=$(awk '{print $3 / $2}' <<< "$rows" | median)
    per_read=$(awk '{print ($4 > 0 ? 1e3 * $3 / $4 : 0)}' <<< "$rows" | median)
    reads=$(awk '{print $4}' <<< "$rows" | median)
    o_share=$(awk '{print $5 / $2}' <<< "$rows" | median)
    echo "$wall,$cpu,$share,$per_read,$reads,$o_share,$(wc -l <<< "$rows"),$label"  # the label may hold commas: last
  done
} > "$CSV"

{
  printf 'daemon CPU while emulated disks wait: %d files of 8-32 KiB read cold by one cat, %d disks; medians of %d\n' \
    "$FILES" "$DISKS" "$REPEATS"
  printf '%-28s %9s %10s %9s %12s %8s\n' run "wall s" "CPU s" "CPU/wall" "CPU ms/read" "o share"
  tail -n +2 "$CSV" | while IFS=, read -r wall cpu share per_read _ o_share _ label; do
    printf '%-28s %9.3f %10.3f %8.2f%% %12.3f %7.2f%%\n' "$label" "$wall" "$cpu" \
      "$(awk -v s="$share" 'BEGIN {print 100 * s}')" "$per_read" "$(awk -v s="$o_share" 'BEGIN {print 100 * s}')"
  done
  echo "idle: the mounted daemon doing nothing for $IDLE_SECONDS s. CPU: user + system of all daemon"
  echo "threads. o share: the overhead o the emulated disks charged, over wall time."
} | tee "$TXT"
echo "results: $CSV $TXT"
