#!/bin/bash
# What libtipspec costs a program whose reads all hit the cache, where speculation cannot help.
# Runs overhead_reader over every file in DIR (warm in the page cache) in three ways, RUNS times
# each, interleaved so load changes hit all alike, and prints medians:
#   plain        no library
#   preloaded    LD_PRELOAD=libtipspec.so, speculation not started (no TIPSPEC_MOUNT)
#   speculating  speculation on DIR with the default knobs (hints to a log file, since DIR is
#                a plain directory; on a mount they would be ioctls)
#   never-fork   the same with TIPSPEC_STALL_USEC so high that no read counts as a stall: what
#                every read of the mount costs when no child runs (the fast path)
# wall = the program's elapsed time, self = its own CPU time (what the interposed calls add to
# the program), children = CPU time of the speculating children it reaped (spent on other
# cores or in the program's idle time; the last child, reaped at exit, is not included).
# usage: measure_overhead.sh LIBTIPSPEC_SO OVERHEAD_READER DIR [RUNS] [MODE BLOCK PASSES]
set -euo pipefail
library=$1 reader=$2 dir=$3 runs=${4:-15} mode=${5:-read} block=${6:-4096} passes=${7:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
files=("$dir"/*)
cat "${files[@]}" > /dev/null  # warm the page cache

run() {  # run VARIANT: appends "wall self children" to $work/VARIANT
  local -a env_vars=()
  case $1 in
    preloaded) env_vars=(LD_PRELOAD="$library") ;;
    speculating) env_vars=(LD_PRELOAD="$library" TIPSPEC_MOUNT="$dir"
                           TIPSPEC_HINT_LOG="$work/hints.log" TIPSPEC_STATS_FILE="$work/stats") ;;
    never-fork) env_vars=(LD_PRELOAD="$library" TIPSPEC_MOUNT="$dir" TIPSPEC_STALL_USEC=4000000000
                          TIPSPEC_HINT_LOG="$work/hints.log") ;;
  esac
  env "${env_vars[@]}" "$reader" "$mode" "$block" "$passes" "${files[@]}" 2>&1 >/dev/null |
    awk '/^wall_ms/ {print $2, $4, $6}' >> "$work/$1"
  rm -f "$work/hints.log"
}

for ((i = 0; i < runs; ++i)); do
  for variant in plain preloaded never-fork speculating; do run $variant; done
done

median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
printf "%s, %s-byte pieces, %d passes over %d files, %d runs each (medians, ms)\n" \
  "$mode" "$block" "$passes" "${#files[@]}" "$runs"
printf "%-12s %10s %10s %10s\n" variant wall self children
for variant in plain preloaded never-fork speculating; do
  printf "%-12s %10.2f %10.2f %10.2f\n" $variant \
    "$(cut -d' ' -f1 "$work/$variant" | median)" "$(cut -d' ' -f2 "$work/$variant" | median)" \
    "$(cut -d' ' -f3 "$work/$variant" | median)"
done
awk '{sum[$1] += $2} END {printf "speculating, all runs: forks %d, reads checked %d, hints consumed %d\n",
     sum["tipspec.forks"], sum["tipspec.reads_checked"], sum["tipspec.hints_consumed"]}' "$work/stats"
