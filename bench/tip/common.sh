# Shared by the bench/tip scripts (sourced, not run). Sets up a scratch 4-disk volume under
# /tmp, a trap that always unmounts it and removes the scratch files, cold mounts, medians,
# and readers for the mount's counters.
BENCH_NAME=tip
source "$(dirname "${BASH_SOURCE[0]}")/../lib/scratch_volume.sh"
RANDOM_READER=$BUILD/bench/tip/tipfs-tip-random-reader
FILE_READER=$BUILD/bench/tip/tipfs-tip-file-reader

make_volume() { "$TIPFS" mkfs "${DISKS[@]}" >/dev/null; }
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
