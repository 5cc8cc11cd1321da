#!/usr/bin/env bash
# Hinted random 64 KiB reads over a large file (issue 4 benchmark), on 4 emulated disks per
# profile, 12 MiB cache, cold cache every run. tipfs-tip-random-reader reads N distinct blocks of
# a 1 GiB file in a seeded random order, one pread() each. Variants side by side per repeat:
#   hinted    the whole order disclosed first (TIPFS_IOC_HINT_FD), mount --hints=on
#   none      the same reads without hints (the original program)
#   ignored   the hinted program on a mount with --hints=ignore
# The array's modelled aggregate limit for such reads is 4 disks x 64 KiB per service time, where
# a random 64 KiB request costs the profile's positioning (seek + half a turn) + 64 KiB / media
# rate, read here from the mount's .tipfs/disk-model. Goal: hinted / limit >= 0.9; ignored vs
# none within 2%. A random sample of blocks never falls evenly on the disks, and the reads are
# consumed in order, so the busiest disk bounds every run: the balance bound N / (4 x the most
# requests one disk served) is printed beside the limit. `late` counts completions the real
# backing store delivered after the model's deadline: runs with many are paced by the machine,
# not the model.
# Usage: bench/tip/run_random.sh [--repeats 3] [--profiles "hdd hp-c2247"] [--cache 12M]
#          [--data-cache direct|kernel] [--size 1G] [--blocks-hdd 1600] [--blocks-hp-c2247 1200]
source "$(dirname "$0")/common.sh"
REPEATS=3 PROFILES="hdd hp-c2247" CACHE=12M DATA_CACHE=direct SIZE=1G
declare -A BLOCKS=([hdd]=1600 [hp-c2247]=1200)
while (($#)); do
  case $1 in
    --repeats) REPEATS=$2; shift 2 ;;
    --profiles) PROFILES=$2; shift 2 ;;
    --cache) CACHE=$2; shift 2 ;;
    --data-cache) DATA_CACHE=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    --blocks-*) BLOCKS[${1#--blocks-}]=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
need "$RANDOM_READER"
CSV=$RESULTS/random.csv
BLOCK=65536

make_volume
"$TIPFS" mount "${DISKS[0]}" "$MNT"
head -c "$SIZE" /dev/urandom >"$MNT/big"
unmount

echo "profile,data_cache,repeat,variant,blocks,elapsed_s,mb_per_s,limit_mb_per_s,demand_misses,hints_prefetched,hints_used,disk_util,late,checksum,max_disk_reads,balance_bound" >"$CSV"
VARIANTS=(hinted none ignored)
for profile in $PROFILES; do
  n=${BLOCKS[$profile]:-1000}
  for ((r = 0; r < REPEATS; r++)); do
    for ((k = 0; k < 3; k++)); do
      v=${VARIANTS[(k + r) % 3]}
      args=(--cache-size "$CACHE" --disk-model "$profile" --data-cache "$DATA_CACHE")
      [[ $v = ignored ]] && args+=(--hints ignore)
      cold_mount "${args[@]}"
      # Service time of one random 64 KiB request: seek + 60/rpm/2 + 64 KiB / rate.
      limit=$(awk -v b=$BLOCK '{
          for (i = 1; i <= NF; i++) {
            if ($i == "(seek") seek = $(i + 1);
            if ($i == "rpm)," || $i == "rpm)") rpm = $(i - 1);
            if ($i ~ /^MB\/s/) rate = $(i - 1);
          }
        } END { service = seek / 1000 + 30 / rpm + b / (rate * 1e6); printf "%.3f", 4 * b / service / 1e6 }' \
        <(sed -n 2p "$MNT/.tipfs/disk-model"))
      report=$("$RANDOM_READER" --file "$MNT/big" --blocks "$n" --seed $((r + 1)) \
        --hints "$([[ $v = none ]] && echo off || echo on)")
      most=$(grep -o '"reads_total":[0-9]*' "$MNT/.tipfs/stats.json" | cut -d: -f2 | sort -n | tail -1)
      printf '%s,%s,%d,%s,%d,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n' "$profile" "$DATA_CACHE" "$r" "$v" \
        "$n" "$(field elapsed "$report")" "$(field mb_per_s "$report")" "$limit" \
        "$(counter demand.misses)" "$(counter hints.prefetched)" "$(counter hints.used)" \
        "$(disk_util)" "$(counter disk.late.completions)" "$(field checksum "$report")" "$most" \
        "$(awk -v n="$n" -v m="$most" 'BEGIN {printf "%.3f", n / (4 * m)}')" >>"$CSV"
      unmount
    done
  done
done

col() { median_where "$CSV" "$3" "profile=$1" "variant=$2"; }  # col PROFILE VARIANT COLUMN: its median
echo
machine_note
printf 'random 64 KiB reads of a %s file, 4 emulated disks, cache %s, --data-cache %s, cold, medians of %d (MB = 10^6 B)\n' \
  "$SIZE" "$CACHE" "$DATA_CACHE" "$REPEATS"
printf '%-9s %6s %7s %7s %14s %8s %8s %7s %7s %16s %9s\n' profile blocks "hinted" "limit" \
  "hinted/limit" "balance" "h/bal" "none" "ignored" "ignored/none s" "late n/i"
for profile in $PROFILES; do
  h=$(col "$profile" hinted 7) l=$(col "$profile" hinted 8) o=$(col "$profile" none 7)
  i=$(col "$profile" ignored 7) to=$(col "$profile" none 6) ti=$(col "$profile" ignored 6)
  b=$(col "$profile" hinted 16)
  printf '%-9s %6s %7.3f %7.3f %7s (>=0.9) %8s %8s %7.3f %7.3f %9s (<=1.02) %4s/%s\n' "$profile" \
    "${BLOCKS[$profile]:-1000}" "$h" "$l" "$(ratio "$h" "$l")" "$b" \
    "$(ratio "$(ratio "$h" "$l")" "$b")" "$o" "$i" "$(ratio "$ti" "$to")" \
    "$(col "$profile" none 13)" "$(col "$profile" ignored 13)"
done
echo "(MB/s; balance = N / (4 x busiest disk's requests) in the hinted runs; late = completions the"
echo " backing store delivered after the model's deadline, median per run)"
echo "runs: $CSV"
