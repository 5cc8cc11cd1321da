#!/usr/bin/env bash
# Two builds of libtipspec side by side (a change against its base): GNU grep -r and the agrep
# workload, original and under each build's `tipfs run`, on 4-disk volumes with no disk model,
# `ssd` and `hp-c2247` (by default), 12 MiB cache, cold (remount + page-cache drop) before every
# run. In each repeat the variants run in an order rotated per repeat, so that both builds see
# the same load; outputs must equal the original's. The mounts are made by the first build's
# tipfs (the daemon is the same; only what `tipfs run` preloads differs). Prints medians and
# ratios; every run with the mount's and libtipspec's counters goes to bench/results/spec/compare.csv.
# Usage: bench/spec/run_compare.sh --builds "build /path/to/base/build" [--repeats 3]
#          [--profiles "none ssd hp-c2247"] [--programs "grep agrep"] [--files 400] [--total 8M]
#          [--cache 12M]
source "$(dirname "$0")/common.sh"
REPEATS=3 PROFILES="none ssd hp-c2247" PROGRAMS="grep agrep" FILES=400 TOTAL=8M CACHE=12M
BUILDS=""
while (($#)); do
  case $1 in
    --builds) BUILDS=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --profiles) PROFILES=$2; shift 2 ;;
    --programs) PROGRAMS=$2; shift 2 ;;
    --files) FILES=$2; shift 2 ;;
    --total) TOTAL=$2; shift 2 ;;
    --cache) CACHE=$2; shift 2 ;;
    -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_compare.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
read -ra builds <<<"$BUILDS"
for ((i = 0; i < ${#builds[@]}; i++)); do  # absolute: the runs start in the mount
  [[ ${builds[i]} = /* ]] || builds[i]=$REPO/${builds[i]}
done
((${#builds[@]} >= 1)) || { echo "run_compare.sh: --builds \"DIR [DIR...]\" is required" >&2; exit 2; }
for b in "${builds[@]}"; do need "$b/cli/tipfs" "$b/speculate/libtipspec.so"; done
need "$GEN" "$AGREP"
CSV=$RESULTS/compare.csv

search_data "$FILES" "$TOTAL"
variants=(original)
for ((i = 0; i < ${#builds[@]}; i++)); do variants+=("spec$i"); done
n=${#variants[@]}
echo "profile,repeat,program,variant,elapsed_s,$COUNTER_HEADER" >"$CSV"
for profile in $PROFILES; do
  for ((r = 0; r < REPEATS; r++)); do
    for program in $PROGRAMS; do
      for ((k = 0; k < n; k++)); do
        v=${variants[(k + r) % n]}
        cold_mount --cache-size "$CACHE" --disk-model "$profile"
        read -ra cmd <<<"$(search_command "$program")"
        if [[ $v = original ]]; then
          timed_run 0 "$WORK/out.$program.$v" "${cmd[@]}"
        else
          saved=$TIPFS
          TIPFS=${builds[${v#spec}]}/cli/tipfs
          timed_run 1 "$WORK/out.$program.$v" "${cmd[@]}"
          TIPFS=$saved
        fi
        same_output "$program" "$v"
        echo "${profile//,/;},$r,$program,$v,$ELAPSED,$(counter_columns)" >>"$CSV"
        echo "  $profile repeat $r $program $v: ${ELAPSED}s" >&2
        unmount
      done
    done
  done
done

col() {  # col PROFILE PROGRAM VARIANT COLUMN: its median
  median_where "$CSV" "$4" "profile=${1//,/;}" "program=$2" "variant=$3"
}
echo
machine_note
printf 'compare: %s files, %s, 4 emulated disks, cache %s, cold, medians of %d\n' "$FILES" \
  "$TOTAL" "$CACHE" "$REPEATS"
for ((i = 0; i < ${#builds[@]}; i++)); do echo "spec$i: ${builds[i]}"; done
printf '%-10s %-6s %-9s %9s %9s %7s %7s %9s %11s %5s %5s %8s\n' profile prog variant "s" "/orig" \
  forks deferred "consumed" "overhead ms" paid lost "saved ms"
for profile in $PROFILES; do
  for program in $PROGRAMS; do
    o=$(col "$profile" "$program" original elapsed_s)
    for v in "${variants[@]}"; do
      s=$(col "$profile" "$program" "$v" elapsed_s)
      printf '%-10s %-6s %-9s %9s %9s %7s %7s %9s %11s %5s %5s %8s\n' "$profile" "$program" "$v" "$s" \
        "$(ratio "$s" "$o")" "$(col "$profile" "$program" "$v" forks)" \
        "$(col "$profile" "$program" "$v" forks_deferred)" \
        "$(col "$profile" "$program" "$v" hints_consumed)" \
        "$(col "$profile" "$program" "$v" overhead_ms)" \
        "$(col "$profile" "$program" "$v" children_paid)" \
        "$(col "$profile" "$program" "$v" children_lost)" \
        "$(col "$profile" "$program" "$v" saved_ms)"
    done
  done
done
echo "runs: $CSV"
