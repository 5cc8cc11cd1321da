#!/usr/bin/env bash
# A hinting program beside one that does not (issue 16's benchmark): agrep with manual hints
# (bench/workloads, the agrep data set, all files disclosed first) runs at the same time as a
# re-reader, tipfs-tip-file-reader without hints, that reads a working set of 64 KiB files
# (0.6, 0.9 and 1.2 x the cache) PASSES times, each pass in a new seeded random order, after one
# untimed pass that makes the set warm (so the question is who keeps it). 4
# emulated disks, one cache (--data-cache direct, so the daemon's cache is the only one), cold
# at the start of every run. Policies, side by side in each repeat (order rotated per repeat):
#   on       the TIP manager (mount --hints=on)
#   always   hinted blocks always prefetched to the horizon (mount --hints=always)
#   ignore   hints accepted and counted, nothing prefetched (mount --hints=ignore): LRU alone
# Prints each program's time and the sum per policy (medians), and the manager's sum over the
# better of the two simple policies; every run goes to bench/results/tip/competition.csv.
# Usage: bench/tip/run_competition.sh [--repeats 3] [--profile hp-c2247] [--cache 12M]
#                                     [--sets "0.6 0.9 1.2"] [--passes 50] [--passes-over 4]
#                                     [--alone]
# --alone also runs each program by itself on a mount of its own (--hints on), per set and
# repeat: the sum of the two is what no policy sharing one cache and one array can beat, so it
# bounds what the manager can gain over the simple policies in that cell.
# A set larger than the cache misses on most reads whatever the policy (each miss one disk
# access), so it is read --passes-over times instead of --passes, which keeps a run near agrep's.
source "$(dirname "$0")/common.sh"
REPEATS=3 PROFILE=hp-c2247 CACHE=12M SETS="0.6 0.9 1.2" PASSES=50 PASSES_OVER=4 ALONE=0
while (($#)); do
  case $1 in
    --repeats) REPEATS=$2; shift 2 ;;
    --profile) PROFILE=$2; shift 2 ;;
    --cache) CACHE=$2; shift 2 ;;
    --sets) SETS=$2; shift 2 ;;
    --passes) PASSES=$2; shift 2 ;;
    --passes-over) PASSES_OVER=$2; shift 2 ;;
    --alone) ALONE=1; shift ;;
    -h | --help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
need "$GEN" "$AGREP" "$FILE_READER"
CSV=$RESULTS/competition.csv
cache_bytes=$(numfmt --from=iec "$CACHE")
files_for() { awk -v f="$1" -v c="$cache_bytes" 'BEGIN {printf "%d\n", f * c / 65536 + 0.5}'; }
max_files=0
for s in $SETS; do n=$(files_for "$s"); ((n > max_files)) && max_files=$n; done

make_volume
"$TIPFS" mount "${DISKS[0]}" "$MNT"  # no disk model: the data sets are written at full speed
PATTERN=$("$GEN" agrep --dir "$MNT" --files 1349 --total 18M 2>/dev/null | sed 's/.*pattern=//')
mkdir "$MNT/set"
for ((i = 0; i < max_files; i++)); do head -c 65536 /dev/urandom >"$MNT/set/$i"; done
unmount

# reread_list N PASSES SEED: passes over files 0..N-1, each in its own seeded random order
reread_list() {
  awk -v n="$1" -v passes="$2" -v seed="$3" -v dir="$MNT/set" 'BEGIN {
    srand(seed)
    for (p = 0; p < passes; p++) {
      for (i = 0; i < n; i++) order[i] = i
      for (i = n - 1; i > 0; i--) {j = int(rand() * (i + 1)); t = order[i]; order[i] = order[j]; order[j] = t}
      for (i = 0; i < n; i++) print dir "/" order[i]
    }}'
}

echo "set,files,passes,repeat,policy,agrep_s,reread_s,sum_s,demand_hits,demand_misses,hinted_prefetched,hinted_ejected,manager_rounds,daemon_cpu_s" >"$CSV"
POLICIES=(on always ignore)
for s in $SETS; do
  n=$(files_for "$s")
  passes=$(awk -v s="$s" -v a="$PASSES" -v b="$PASSES_OVER" 'BEGIN {print (s > 1 ? b : a)}')
  for ((r = 0; r < REPEATS; r++)); do
    reread_list "$n" "$passes" "$((1601 + r))" >"$WORK/list"
    head -n "$n" "$WORK/list" >"$WORK/warm"
    for ((k = 0; k < 3; k++)); do
      policy=${POLICIES[(k + r) % 3]}
      cold_mount --cache-size "$CACHE" --disk-model "$PROFILE" --data-cache direct --hints "$policy"
      "$FILE_READER" --list "$WORK/warm" >/dev/null  # the working set is warm, as a re-reader's is
      cpu_before=$(daemon_cpu)
      "$AGREP" --variant manual -p "$PATTERN" "$MNT/text" 2>"$WORK/agrep.err" >/dev/null &
      agrep_pid=$!
      "$FILE_READER" --list "$WORK/list" >"$WORK/reread.out"
      wait "$agrep_pid"
      a=$(field elapsed "$(cat "$WORK/agrep.err")")
      b=$(field elapsed "$(cat "$WORK/reread.out")")
      # The daemon's CPU while both ran: on 2 CPUs the re-reader, CPU-bound on hits, shares it.
      cpu=$(awk -v a="$cpu_before" -v b="$(daemon_cpu)" 'BEGIN {printf "%.2f", b - a}')
      printf '%s,%d,%d,%d,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n' "$s" "$n" "$passes" "$r" "$policy" "$a" \
        "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.3f", a + b}')" "$(counter demand.hits)" \
        "$(counter demand.misses)" "$(counter hints.prefetched)" "$(counter hints.ejected)" \
        "$(counter hints.manager.rounds)" "$cpu" >>"$CSV"
      unmount
    done
    if ((ALONE)); then
      cold_mount --cache-size "$CACHE" --disk-model "$PROFILE" --data-cache direct --hints on
      "$FILE_READER" --list "$WORK/warm" >/dev/null
      "$FILE_READER" --list "$WORK/list" >"$WORK/reread.out"
      b=$(field elapsed "$(cat "$WORK/reread.out")")
      unmount
      cold_mount --cache-size "$CACHE" --disk-model "$PROFILE" --data-cache direct --hints on
      "$AGREP" --variant manual -p "$PATTERN" "$MNT/text" 2>"$WORK/agrep.err" >/dev/null
      a=$(field elapsed "$(cat "$WORK/agrep.err")")
      printf '%s,%d,%d,%d,alone,%s,%s,%s,,,,,,\n' "$s" "$n" "$passes" "$r" "$a" "$b" \
        "$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.3f", a + b}')" >>"$CSV"
      unmount
    fi
  done
done

col() { median_where "$CSV" "$3" "set=$1" "policy=$2"; }  # col SET POLICY COLUMN: its median
echo
machine_note
printf 'agrep (manual hints, 1349 files, 18M) beside a re-reader of 64 KiB files (%d passes,\n' "$PASSES"
printf '%d for a set over the cache), 4 emulated %s disks, cache %s, --data-cache direct, cold, medians of %d\n' "$PASSES_OVER" \
  "$PROFILE" "$CACHE" "$REPEATS"
printf '%-5s %-7s %8s %9s %8s %8s %10s   %s\n' set policy "agrep s" "reread s" "sum s" rounds \
  "daemon cpu" "sum / better of always, ignore"
for s in $SETS; do
  best=$(printf '%s\n%s\n' "$(col "$s" always 8)" "$(col "$s" ignore 8)" | sort -g | head -1)
  shown=(on always ignore)
  ((ALONE)) && shown+=(alone)
  for p in "${shown[@]}"; do
    printf '%-5s %-7s %8.2f %9.2f %8.2f %8s %10s' "$s" "$p" "$(col "$s" "$p" 6)" \
      "$(col "$s" "$p" 7)" "$(col "$s" "$p" 8)" "$(col "$s" "$p" manager_rounds)" \
      "$(col "$s" "$p" daemon_cpu_s)"
    [[ $p = on || $p = alone ]] && printf '   %s' "$(ratio "$(col "$s" "$p" 8)" "$best")"
    echo
  done
done
echo "(set = the re-reader's working set over the cache; goal: sum / better <= 1.02 everywhere,"
echo " <= 0.90 where the cache is contested)"
((ALONE)) && echo "(alone: each program by itself on its own mount; no shared policy's sum can be lower)"
echo "runs: $CSV"
