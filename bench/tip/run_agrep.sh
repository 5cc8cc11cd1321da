#!/usr/bin/env bash
# Agrep with manual hints vs without (issue 4 benchmark; SpecHint's Figure 3 workload, TIP's
# Agrep). 1,349 text files, about 18 MiB, searched in a known order by tipfs-bench-agrep
# (bench/workloads), on 4 emulated disks per profile, 12 MiB cache, cold cache every run.
# Variants side by side in each repeat (order rotated per repeat):
#   original  no hints, mount --hints=on
#   manual    all files disclosed first (TIPFS_IOC_HINT_PATHS), mount --hints=on
#   ignored   the manual program on a mount with --hints=ignore (Figure 4's overhead baseline)
# Prints the table of medians and writes every run to bench/results/tip/agrep.csv.
# Usage: bench/tip/run_agrep.sh [--repeats 3] [--profiles "hdd hp-c2247"] [--cache 12M]
#                               [--data-cache kernel|direct] [--files 1349] [--total 18M]
source "$(dirname "$0")/common.sh"
REPEATS=3 PROFILES="hdd hp-c2247" CACHE=12M DATA_CACHE=kernel FILES=1349 TOTAL=18M
while (($#)); do
  case $1 in
    --repeats) REPEATS=$2; shift 2 ;;
    --profiles) PROFILES=$2; shift 2 ;;
    --cache) CACHE=$2; shift 2 ;;
    --data-cache) DATA_CACHE=$2; shift 2 ;;
    --files) FILES=$2; shift 2 ;;
    --total) TOTAL=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
need "$GEN" "$AGREP"
CSV=$RESULTS/agrep.csv

make_volume
"$TIPFS" mount "${DISKS[0]}" "$MNT"  # no disk model: the data set is written at full speed
PATTERN=$("$GEN" agrep --dir "$MNT" --files "$FILES" --total "$TOTAL" 2>/dev/null | sed 's/.*pattern=//')
unmount

echo "profile,data_cache,repeat,variant,elapsed_s,demand_misses,demand_hits,stall_s,hints_prefetched,hints_used,horizon,disk_util,late" >"$CSV"
VARIANTS=(original manual ignored)
for profile in $PROFILES; do
  for ((r = 0; r < REPEATS; r++)); do
    for ((k = 0; k < 3; k++)); do
      v=${VARIANTS[(k + r) % 3]}
      args=(--cache-size "$CACHE" --disk-model "$profile" --data-cache "$DATA_CACHE")
      [[ $v = ignored ]] && args+=(--hints ignore)
      cold_mount "${args[@]}"
      program_variant=$([[ $v = original ]] && echo original || echo manual)
      report=$("$AGREP" --variant "$program_variant" -p "$PATTERN" "$MNT/text" 2>&1 >"$WORK/out.$v")
      if [[ -f $WORK/out.original ]] && ! cmp -s "$WORK/out.original" "$WORK/out.$v"; then
        echo "agrep $v printed other matches than original" >&2; exit 1
      fi
      printf '%s,%s,%d,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n' "$profile" "$DATA_CACHE" "$r" "$v" \
        "$(field elapsed "$report")" "$(counter demand.misses)" "$(counter demand.hits)" \
        "$(awk -v n="$(counter demand.stall.nanos)" 'BEGIN {printf "%.3f", n / 1e9}')" \
        "$(counter hints.prefetched)" "$(counter hints.used)" "$(counter hints.horizon)" \
        "$(disk_util)" "$(counter disk.late.completions)" >>"$CSV"
      unmount
    done
  done
done

col() { median_where "$CSV" "$3" "profile=$1" "variant=$2"; }  # col PROFILE VARIANT COLUMN: its median
echo
machine_note
printf 'agrep: %s files, %s, 4 emulated disks, cache %s, --data-cache %s, cold, medians of %d\n' \
  "$FILES" "$TOTAL" "$CACHE" "$DATA_CACHE" "$REPEATS"
printf '%-9s %10s %10s %10s %16s %17s %9s %7s %9s\n' profile "original s" "manual s" "ignored s" \
  "manual/original" "ignored/original" "util(man)" "misses" "late o/m/i"
for profile in $PROFILES; do
  o=$(col "$profile" original 5) m=$(col "$profile" manual 5) i=$(col "$profile" ignored 5)
  printf '%-9s %10.2f %10.2f %10.2f %9s (<=0.30) %10s (<=1.02) %9s %7s %5s/%s/%s\n' "$profile" \
    "$o" "$m" "$i" "$(ratio "$m" "$o")" "$(ratio "$i" "$o")" "$(col "$profile" manual 12)" \
    "$(col "$profile" manual 6)" "$(col "$profile" original 13)" "$(col "$profile" manual 13)" \
    "$(col "$profile" ignored 13)"
done
echo "(util = mean disk utilization in the manual runs; misses = demand block reads that waited,"
echo " mostly for a prefetch already in flight; late = completions the backing store delivered"
echo " after the model's deadline, median per run)"
echo "runs: $CSV"
