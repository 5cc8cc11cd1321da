#!/usr/bin/env bash
# The linker whose reads depend on data read before (issue 5 benchmark; SpecHint's Gnuld and
# DESIGN.md "Beyond the paper"): tipfs-bench-gnuld over 562 objects (60 MiB), on 4 emulated
# disks, 12 MiB cache, cold cache before every run. Variants side by side per repeat:
#   original      no hints
#   manual        the hand-restructured linker (bench/workloads/README.md)
#   wait-off      the original under `tipfs run --wait-for-data off`: the child runs on without
#                 data it has not got (SpecHint's way: it covers more ground, on garbage)
#   wait-on       ... --wait-for-data on: it waits for the data it hinted (follows the true
#                 dependencies, one read at a time)
#   wait-auto     ... TIPSPEC_WAIT=auto: no wait, until two children in a row were useless
#   spec-ignored  the library's default on a mount with --hints=ignore (overhead)
# The image goes outside the mount; its summary (sizes, digest) must equal the original's.
# Prints medians and ratios; every run goes to bench/results/spec/gnuld.csv.
# Usage: bench/spec/run_gnuld.sh [--repeats 3] [--profiles hp-c2247] [--cache 12M]
#          [--data-cache kernel|direct] [--objects 562] [--total 60M]
source "$(dirname "$0")/common.sh"
REPEATS=3 PROFILES=hp-c2247 CACHE=12M DATA_CACHE=kernel OBJECTS=562 TOTAL=60M
while (($#)); do
  case $1 in
    --repeats) REPEATS=$2; shift 2 ;;
    --profiles) PROFILES=$2; shift 2 ;;
    --cache) CACHE=$2; shift 2 ;;
    --data-cache) DATA_CACHE=$2; shift 2 ;;
    --objects) OBJECTS=$2; shift 2 ;;
    --total) TOTAL=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
need "$GEN" "$GNULD"
CSV=$RESULTS/gnuld.csv

make_volume
"$GEN" gnuld --dir "$MNT" --objects "$OBJECTS" --total "$TOTAL" >/dev/null 2>&1
OBJECT_FILES=$(cd "$MNT" && ls objects/*.tobj)
unmount

echo "profile,data_cache,repeat,variant,elapsed_s,$COUNTER_HEADER" >"$CSV"
VARIANTS=(original manual wait-off wait-on wait-auto spec-ignored)
n=${#VARIANTS[@]}
for profile in $PROFILES; do
  for ((r = 0; r < REPEATS; r++)); do
    for ((k = 0; k < n; k++)); do
      v=${VARIANTS[(k + r) % n]}
      args=(--cache-size "$CACHE" --disk-model "$profile" --data-cache "$DATA_CACHE")
      [[ $v = spec-ignored ]] && args+=(--hints ignore)
      cold_mount "${args[@]}"
      variant=original speculate=0
      case $v in
        manual) variant=manual ;;
        wait-off | wait-on | wait-auto) speculate=$v ;;
        spec-ignored) speculate=1 ;;
      esac
      # shellcheck disable=SC2086  # the object list is meant to split
      timed_run "$speculate" "$WORK/out.$v" "$GNULD" --variant "$variant" -o "$WORK/image" \
        $OBJECT_FILES
      if [[ -f $WORK/out.original ]] && ! cmp -s "$WORK/out.original" "$WORK/out.$v"; then
        echo "gnuld $v linked another image than the original" >&2; exit 1
      fi
      echo "$profile,$DATA_CACHE,$r,$v,$ELAPSED,$(counter_columns)" >>"$CSV"
      echo "  $profile repeat $r $v: ${ELAPSED}s" >&2
      unmount
    done
  done
done

col() {  # col PROFILE VARIANT COLUMN: its median
  median_where "$CSV" "$3" "profile=$1" "variant=$2"
}
echo
machine_note
printf 'gnuld: %s objects, %s, 4 emulated disks, cache %s, --data-cache %s, cold, medians of %d\n' \
  "$OBJECTS" "$TOTAL" "$CACHE" "$DATA_CACHE" "$REPEATS"
printf '%-9s %-12s %9s %8s %7s %9s %9s %8s %9s\n' profile variant "s" "/orig" forks consumed \
  "hinted" deferred "ovh ms"
for profile in $PROFILES; do
  o=$(col "$profile" original elapsed_s)
  for v in "${VARIANTS[@]}"; do
    e=$(col "$profile" "$v" elapsed_s)
    printf '%-9s %-12s %9s %8s %7s %9s %9s %8s %9s\n' "$profile" "$v" "$e" "$(ratio "$e" "$o")" \
      "$(col "$profile" "$v" forks)" "$(col "$profile" "$v" hints_consumed)" \
      "$(ratio "$(col "$profile" "$v" spec_consumed_blocks)" "$(col "$profile" "$v" demand_reads)")" \
      "$(col "$profile" "$v" forks_deferred)" "$(col "$profile" "$v" overhead_ms)"
  done
done
echo "runs: $CSV"
