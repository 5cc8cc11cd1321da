#!/usr/bin/env bash
# Speculation on a busy machine: the agrep workload and GNU grep -r while --hogs CPU-bound
# processes (stress-ng --cpu) keep every CPU busy, as builds and other programs do on a shared
# machine. The speculating child runs at SCHED_IDLE: without a CPU group of its own it runs only
# when a CPU is idle, which on a busy machine is never, also while its program waits for the
# disk. `tipfs run` puts the tree in a CPU group of its own (--cpu-group on, the default; see
# tipfs(8)), so the child runs on the program's share. Variants: original, speculating (group),
# speculating --cpu-group off. Cold cache every run, order rotated per repeat, outputs compared.
# Usage: bench/spec/run_busy.sh [--repeats 5] [--profiles "none none,L=2ms hp-c2247"] [--hogs N]
#          [--cache 12M] [--files 400] [--total 8M] [--programs "agrep grep"]
source "$(dirname "$0")/common.sh"
REPEATS=5 PROFILES="none none,L=2ms hp-c2247" HOGS=$(nproc) CACHE=12M FILES=400 TOTAL=8M
PROGRAMS="agrep grep"
while (($#)); do
  case $1 in
    --repeats) REPEATS=$2; shift 2 ;;
    --profiles) PROFILES=$2; shift 2 ;;
    --hogs) HOGS=$2; shift 2 ;;
    --cache) CACHE=$2; shift 2 ;;
    --files) FILES=$2; shift 2 ;;
    --total) TOTAL=$2; shift 2 ;;
    --programs) PROGRAMS=$2; shift 2 ;;
    -h | --help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_busy.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ $HOGS =~ ^[0-9]+$ ]] || { echo "run_busy.sh: --hogs '$HOGS' is not a number" >&2; exit 2; }
need "$GEN" "$AGREP"
command -v stress-ng >/dev/null || { echo "run_busy.sh: stress-ng not found (apt-get install stress-ng)" >&2; exit 1; }
CSV=$RESULTS/busy.csv

search_data "$FILES" "$TOTAL"
HOG_PID=""
if ((HOGS > 0)); then
  stress-ng --cpu "$HOGS" --quiet &
  HOG_PID=$!
  trap 'kill "$HOG_PID" 2>/dev/null; wait "$HOG_PID" 2>/dev/null; cleanup' EXIT
fi
VARIANTS=(original speculating no-cpu-group)
echo "profile,hogs,repeat,program,variant,elapsed_s,$COUNTER_HEADER" >"$CSV"
for profile in $PROFILES; do
  for ((r = 0; r < REPEATS; r++)); do
    for program in $PROGRAMS; do
      for ((k = 0; k < ${#VARIANTS[@]}; k++)); do
        v=${VARIANTS[(k + r) % ${#VARIANTS[@]}]}
        cold_mount --cache-size "$CACHE" --disk-model "$profile"
        case $v in original) speculate=0 ;; speculating) speculate=1 ;; *) speculate=$v ;; esac
        read -ra cmd <<<"$(search_command "$program")"
        timed_run "$speculate" "$WORK/out.$program.$v" "${cmd[@]}"
        same_output "$program" "$v"
        echo "${profile//,/;},$HOGS,$r,$program,$v,$ELAPSED,$(counter_columns)" >>"$CSV"  # "none,L=2ms": ; in the CSV
        echo "  $profile repeat $r $program $v: ${ELAPSED}s" >&2
        unmount
      done
    done
  done
done

col() {  # col PROFILE PROGRAM VARIANT: median elapsed
  median_where "$CSV" elapsed_s "profile=${1//,/;}" "program=$2" "variant=$3"
}
echo
machine_note
printf 'busy machine: %s CPU hogs; %s files, %s, 4 emulated disks, cache %s, cold, medians of %d\n' \
  "$HOGS" "$FILES" "$TOTAL" "$CACHE" "$REPEATS"
printf '%-12s %-6s %9s %9s %12s %11s %14s\n' profile prog "orig s" "spec s" "no-group s" \
  "spec/orig" "no-group/orig"
for profile in $PROFILES; do
  for program in $PROGRAMS; do
    o=$(col "$profile" "$program" original)
    s=$(col "$profile" "$program" speculating)
    n=$(col "$profile" "$program" no-cpu-group)
    printf '%-12s %-6s %9s %9s %12s %11s %14s\n' "$profile" "$program" "$o" "$s" "$n" \
      "$(ratio "$s" "$o")" "$(ratio "$n" "$o")"
  done
done
echo "runs: $CSV"
