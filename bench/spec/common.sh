# Shared by the bench/spec scripts (sourced, not run): a scratch 4-disk volume under /tmp that a
# trap always unmounts and removes, cold mounts, one timed run of a command (optionally under
# `tipfs run`) with the mount's and libtipspec's counters, medians and ratios.
BENCH_NAME=spec
source "$(dirname "${BASH_SOURCE[0]}")/../lib/scratch_volume.sh"
GNULD=$BUILD/bench/workloads/tipfs-bench-gnuld
need "$BUILD/speculate/libtipspec.so"

# make_volume: mkfs and mount without a disk model (data sets are written at full speed).
make_volume() { "$TIPFS" mkfs "${DISKS[@]}" >/dev/null && "$TIPFS" mount "${DISKS[0]}" "$MNT"; }

# search_data FILES TOTAL: the agrep workload's text files on the scratch volume; sets PATTERN.
search_data() {
  make_volume
  PATTERN=$("$GEN" agrep --dir "$MNT" --files "$1" --total "$2" 2>/dev/null | sed 's/.*pattern=//')
  unmount
}
# search_command PROGRAM [AGREP-VARIANT]: the command line of agrep (original unless told) or
# GNU grep -r searching those files for PATTERN, from the mount root.
search_command() {
  case $1 in
    agrep) echo "$AGREP" --variant "${2:-original}" -p "$PATTERN" text ;;
    grep) echo grep -r -F "$PATTERN" text ;;
  esac
}
# same_output PROGRAM VARIANT: stop the benchmark when a variant printed other output than the
# original did (timed_run wrote each to $WORK/out.PROGRAM.VARIANT).
same_output() {
  if [[ -f $WORK/out.$1.original ]] && ! cmp -s "$WORK/out.$1.original" "$WORK/out.$1.$2"; then
    echo "$1 $2 printed other output than the original" >&2
    exit 1
  fi
}
# timed_run SPECULATE OUT CMD...: runs CMD in the mount root (SPECULATE=1: under `tipfs run`,
# counters to $WORK/tipspec.txt; SPECULATE=wait-on|wait-off|wait-auto: that wait policy;
# no-cpu-group: without a CPU group of its own), stdout to
# OUT; sets ELAPSED (seconds, from outside: launcher included).
timed_run() {
  local speculate=$1 out=$2
  shift 2
  local -a prefix=()
  rm -f "$WORK/tipspec.txt"
  case $speculate in
    0) ;;
    1) prefix=("$TIPFS" run --mount "$MNT" --stats-file "$WORK/tipspec.txt" --) ;;
    no-cpu-group)
      prefix=("$TIPFS" run --mount "$MNT" --cpu-group off --stats-file "$WORK/tipspec.txt" --) ;;
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
# The columns every run row carries after its own: the mount's and libtipspec's counters.
COUNTER_HEADER="demand_reads,demand_misses,spec_consumed_blocks,hints_prefetched,hints_used,hints_evicted_unused,hints_cancelled,spec_reads,spec_eagain,forks,restarts,hints_consumed,hint_bytes_issued,hint_bytes_consumed,reads_behind,offtrack_behind,offtrack_mismatch,forks_deferred,overhead_ms,load1,children_paid,children_lost,saved_ms,ended_over_budget"
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
  # How the fork policy judged the children (0 from a libtipspec that does not count them).
  printf ',%s,%s,%s,%s' "$(tipspec children_paid)" "$(tipspec children_lost)" \
    "$(awk -v n="$(tipspec saved_nanos)" 'BEGIN {printf "%.1f", n / 1e6}')" \
    "$(tipspec ended_over_budget)"
}
