#!/usr/bin/env bash
# First runs (no history, no learned sites) of the workloads whose parse decides what they read
# next (issue 10), with two builds of libtipspec side by side: per repeat and workload, the
# original and one speculating run per library, each on a cold mount of 4 emulated disks, 12 MiB
# cache, --data-cache direct, with TIPSPEC_HISTORY=0 and an empty TIPSPEC_STATE_DIR. The order of
# the variants rotates with the repeat. Every output must equal the original's.
#   gnuld   tipfs-bench-gnuld over 562 objects (60 MiB), as the harness runs it
#   loader  tipfs-bench-loader, 4,096 samples (64 MiB), 2 epochs
#   json    bench/workloads/json_loader.py over 600 files, shuffled (seed 1)
# Prints medians and ratios to the original; every run goes to bench/results/spec/first.csv.
# Usage: bench/spec/run_first.sh --libs "AFTER.so BEFORE.so" [--repeats 3]
#          [--workloads "gnuld loader json"] [--profile hp-c2247]
# The tools (tipfs, generators, workloads) come from BUILD_DIR (default build).
source "$(dirname "$0")/common.sh"
REPEATS=3 WORKLOADS="gnuld loader json" PROFILE=hp-c2247 LIBS=""
while (($#)); do
  case $1 in
    --repeats) REPEATS=$2; shift 2 ;;
    --workloads) WORKLOADS=$2; shift 2 ;;
    --profile) PROFILE=$2; shift 2 ;;
    --libs) LIBS=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
read -r -a LIB_LIST <<<"$LIBS"
((${#LIB_LIST[@]} > 0)) || { echo "--libs: one or more libtipspec.so to compare" >&2; exit 2; }
LOADER=$BUILD/bench/workloads/tipfs-bench-loader
need "$GEN" "$GNULD" "$LOADER" "${LIB_LIST[@]}"
CSV=$RESULTS/first.csv

make_volume
for w in $WORKLOADS; do
  case $w in
    gnuld) "$GEN" gnuld --dir "$MNT" --objects 562 --total 60M >/dev/null 2>&1 ;;
    loader) "$GEN" loader --dir "$MNT" --samples 4096 --total 64M >/dev/null 2>&1 ;;
    json) /usr/bin/python3 "$REPO/bench/workloads/json_loader.py" generate "$MNT" --seed 1 \
      --files 600 >/dev/null ;;
    *) echo "unknown workload $w" >&2; exit 2 ;;
  esac
done
unmount

command_of() {  # the workload's command line, run from the mount root
  case $1 in
    gnuld) echo "$GNULD" --variant original -o "$WORK/image" objects ;;
    loader) echo "$LOADER" --variant original --epochs 2 samples ;;
    json) echo /usr/bin/python3 "$REPO/bench/workloads/json_loader.py" load . --seed 1 ;;
  esac
}

EXTRA=(sites_learned waits_at_sites reads_predicted sites_unpredictable reads_predicted_whole
  site_waits_dropped)
extra_columns() {  # libtipspec's learned-wait counters, then the mount's tainted blocks consumed
  local k
  for k in "${EXTRA[@]}"; do printf '%s,' "$(tipspec "$k")"; done
  counter hints.speculative_tainted.consumed
}
echo "workload,repeat,variant,elapsed_s,$COUNTER_HEADER,$(IFS=,; echo "${EXTRA[*]}"),tainted_consumed_blocks" >"$CSV"
VARIANTS=(original)
for ((i = 0; i < ${#LIB_LIST[@]}; i++)); do VARIANTS+=("lib$i"); done
n=${#VARIANTS[@]}
for ((r = 0; r < REPEATS; r++)); do
  for w in $WORKLOADS; do
    rm -f "$WORK"/out."$w".*
    for ((k = 0; k < n; k++)); do
      v=${VARIANTS[(k + r) % n]}
      cold_mount --cache-size 12M --disk-model "$PROFILE" --data-cache direct
      rm -rf "$WORK/state" && mkdir -m 700 "$WORK/state"
      speculate=0
      if [[ $v != original ]]; then
        speculate=1
        export TIPSPEC_LIBRARY=${LIB_LIST[${v#lib}]}
      fi
      # shellcheck disable=SC2046  # the command line is meant to split
      TIPSPEC_HISTORY=0 TIPSPEC_STATE_DIR=$WORK/state \
        timed_run "$speculate" "$WORK/out.$w.$v" $(command_of "$w")
      unset TIPSPEC_LIBRARY
      echo "$w,$r,$v,$ELAPSED,$(counter_columns),$(extra_columns)" >>"$CSV"
      echo "  $w repeat $r $v: ${ELAPSED}s (load $(cut -d' ' -f1 /proc/loadavg))" >&2
      unmount
    done
    for v in "${VARIANTS[@]}"; do same_output "$w" "$v"; done
  done
done

col() { median_where "$CSV" "$3" "workload=$1" "variant=$2"; }
echo
machine_note
printf 'first runs: 4 %s disks, cache 12M, direct, cold, medians of %d; libs: %s\n' "$PROFILE" \
  "$REPEATS" "${LIB_LIST[*]}"
printf '%-7s %-9s %9s %7s %6s %9s %6s %6s %6s\n' workload variant s /orig forks consumed learned \
  waits predict
for w in $WORKLOADS; do
  o=$(col "$w" original elapsed_s)
  for v in "${VARIANTS[@]}"; do
    e=$(col "$w" "$v" elapsed_s)
    printf '%-7s %-9s %9s %7s %6s %9s %6s %6s %6s\n' "$w" "$v" "$e" "$(ratio "$e" "$o")" \
      "$(col "$w" "$v" forks)" "$(col "$w" "$v" tainted_consumed_blocks)" \
      "$(col "$w" "$v" sites_learned)" "$(col "$w" "$v" waits_at_sites)" \
      "$(col "$w" "$v" reads_predicted)"
  done
done
echo "runs: $CSV"
