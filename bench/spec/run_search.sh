#!/usr/bin/env bash
# Searching many files with automatic hints (issue 5 benchmark; SpecHint's Agrep, Figure 3/4):
# 1,349 text files, about 18 MiB (tipfs-bench-gen agrep), on 4 emulated disks per profile,
# 12 MiB cache, cold cache (remount + page-cache drop) before every run. Two programs:
#   agrep  tipfs-bench-agrep (bench/workloads): original, manual (every file disclosed first),
#          speculating (the original under `tipfs run`), and speculating on a mount with
#          --hints=ignore (the overhead of speculation when its hints do nothing: Figure 4)
#   grep   GNU grep -r -F: original, speculating, speculating with --hints=ignore
# In each repeat the variants run side by side (order rotated per repeat); outputs must equal
# the original's. Prints medians and ratios, writes every run to bench/results/spec/search.csv.
# Hint accuracy: blocks consumed by speculative hints / blocks read (from the mount); bytes
# hinted wrongly: what the children logged and the program never read (libtipspec), and blocks
# prefetched for hints but never read (the mount).
# Usage: bench/spec/run_search.sh [--repeats 3] [--profiles "hp-c2247 hdd"] [--cache 12M]
#          [--data-cache kernel|direct] [--files 1349] [--total 18M] [--programs "agrep grep"]
source "$(dirname "$0")/common.sh"
REPEATS=3 PROFILES="hp-c2247 hdd" CACHE=12M DATA_CACHE=kernel FILES=1349 TOTAL=18M
PROGRAMS="agrep grep"
while (($#)); do
  case $1 in
    --repeats) REPEATS=$2; shift 2 ;;
    --profiles) PROFILES=$2; shift 2 ;;
    --cache) CACHE=$2; shift 2 ;;
    --data-cache) DATA_CACHE=$2; shift 2 ;;
    --files) FILES=$2; shift 2 ;;
    --total) TOTAL=$2; shift 2 ;;
    --programs) PROGRAMS=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
need "$GEN" "$AGREP"
CSV=$RESULTS/search.csv

search_data "$FILES" "$TOTAL"

variants_of() {
  case $1 in
    agrep) echo original manual speculating spec-ignored ;;
    grep) echo original speculating spec-ignored ;;
  esac
}

echo "profile,data_cache,repeat,program,variant,elapsed_s,$COUNTER_HEADER" >"$CSV"
for profile in $PROFILES; do
  for ((r = 0; r < REPEATS; r++)); do
    for program in $PROGRAMS; do
      read -ra variants <<<"$(variants_of "$program")"
      n=${#variants[@]}
      for ((k = 0; k < n; k++)); do
        v=${variants[(k + r) % n]}
        args=(--cache-size "$CACHE" --disk-model "$profile" --data-cache "$DATA_CACHE")
        [[ $v = spec-ignored ]] && args+=(--hints ignore)
        cold_mount "${args[@]}"
        speculate=0
        [[ $v = speculating || $v = spec-ignored ]] && speculate=1
        agrep_variant=original
        [[ $v = manual ]] && agrep_variant=manual
        read -ra cmd <<<"$(search_command "$program" "$agrep_variant")"
        timed_run "$speculate" "$WORK/out.$program.$v" "${cmd[@]}"
        same_output "$program" "$v"
        echo "$profile,$DATA_CACHE,$r,$program,$v,$ELAPSED,$(counter_columns)" >>"$CSV"
        echo "  $profile repeat $r $program $v: ${ELAPSED}s" >&2
        unmount
      done
    done
  done
done

col() {  # col PROFILE PROGRAM VARIANT COLUMN: its median
  median_where "$CSV" "$4" "profile=$1" "program=$2" "variant=$3"
}
echo
machine_note
printf 'search: %s files, %s, 4 emulated disks, cache %s, --data-cache %s, cold, medians of %d\n' \
  "$FILES" "$TOTAL" "$CACHE" "$DATA_CACHE" "$REPEATS"
printf '%-9s %-6s %9s %9s %9s %9s %11s %11s %11s %9s %11s %12s\n' profile prog "orig s" \
  "manual s" "spec s" "ignored s" "spec/orig" "spec/man" "ign/orig" "hinted" "wrong MiB" \
  "unused blks"
for profile in $PROFILES; do
  for program in $PROGRAMS; do
    o=$(col "$profile" "$program" original elapsed_s)
    m=$(col "$profile" "$program" manual elapsed_s)
    s=$(col "$profile" "$program" speculating elapsed_s)
    i=$(col "$profile" "$program" spec-ignored elapsed_s)
    hinted=$(ratio "$(col "$profile" "$program" speculating spec_consumed_blocks)" \
                   "$(col "$profile" "$program" speculating demand_reads)")
    wrong=$(awk -v a="$(col "$profile" "$program" speculating hint_bytes_issued)" \
                -v b="$(col "$profile" "$program" speculating hint_bytes_consumed)" \
                'BEGIN {printf "%.2f", (a - b) / 1048576}')
    unused=$(awk -v a="$(col "$profile" "$program" speculating hints_prefetched)" \
                 -v b="$(col "$profile" "$program" speculating hints_used)" 'BEGIN {print a - b}')
    printf '%-9s %-6s %9s %9s %9s %9s %5s(.30) %5s(1.05) %5s(1.02) %9s %11s %12s\n' "$profile" \
      "$program" "$o" "$m" "$s" "$i" "$(ratio "$s" "$o")" "$(ratio "$s" "$m")" \
      "$(ratio "$i" "$o")" "$hinted" "$wrong" "$unused"
  done
done
echo "runs: $CSV"
