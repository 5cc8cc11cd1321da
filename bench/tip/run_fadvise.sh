#!/usr/bin/env bash
# The kernel's own help vs tipfs hints, as CPU cost (issue 4 benchmark). The agrep file set
# (1,349 files, about 18 MiB) is read whole, in order, by tipfs-tip-file-reader:
#   native plain     on a plain directory of the backing file system, no disclosure
#   native fadvise   the same, after open + posix_fadvise(WILLNEED) + close of every file
#   tipfs plain      through a tipfs mount (no disk model: real timing), no disclosure
#   tipfs hint       through the mount, after TIPFS_IOC_HINT_PATHS of every file
# There is no emulation on the native side, so times are not comparable with the emulated
# benchmarks; what is compared is CPU: the reader's user + sys time (getrusage), the part of it
# spent disclosing, and for tipfs the daemon's user + sys time over the whole run and over the
# disclosure (/proc/PID/stat, 10 ms ticks; the daemon's share of disclosing includes resolving
# the paths and issuing the first prefetches).
# Cold caches before every run (page cache dropped; tipfs remounted).
# Usage: bench/tip/run_fadvise.sh [--repeats 5] [--cache 64M] [--data-cache kernel|direct]
source "$(dirname "$0")/common.sh"
REPEATS=5 CACHE=64M DATA_CACHE=kernel
while (($#)); do
  case $1 in
    --repeats) REPEATS=$2; shift 2 ;;
    --cache) CACHE=$2; shift 2 ;;
    --data-cache) DATA_CACHE=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
need "$GEN" "$FILE_READER"
CSV=$RESULTS/fadvise.csv
NATIVE=$WORK/native
mkdir -p "$NATIVE"
"$GEN" agrep --dir "$NATIVE" >/dev/null 2>&1
make_volume
"$TIPFS" mount "${DISKS[0]}" "$MNT"
"$GEN" agrep --dir "$MNT" >/dev/null 2>&1
(cd "$NATIVE" && find text -type f | sort) >"$WORK/relative.list"
sed "s|^|$NATIVE/|" "$WORK/relative.list" >"$WORK/native.list"
sed "s|^|$MNT/|" "$WORK/relative.list" >"$WORK/tipfs.list"
FILES=$(wc -l <"$WORK/relative.list")
unmount

echo "mode,repeat,files,elapsed_s,user_s,sys_s,ahead_user_s,ahead_sys_s,daemon_cpu_s,checksum,daemon_ahead_s" >"$CSV"
MODES=(native-plain native-fadvise tipfs-plain tipfs-hint)
for ((r = 0; r < REPEATS; r++)); do
  for ((k = 0; k < 4; k++)); do
    m=${MODES[(k + r) % 4]}
    if [[ $m = native-* ]]; then
      unmount
      sync
      echo 3 >/proc/sys/vm/drop_caches
      report=$("$FILE_READER" --list "$WORK/native.list" --mode "${m#native-}")
    else
      cold_mount --cache-size "$CACHE" --data-cache "$DATA_CACHE"
      report=$("$FILE_READER" --list "$WORK/tipfs.list" --mode "${m#tipfs-}" --mount "$MNT" \
        --daemon-pid "$(cat "${DISKS[0]}/tipfs.pid")")
    fi
    printf '%s,%d,%s,%s,%s,%s,%s,%s,%s,%s,%s\n' "$m" "$r" "$(field files "$report")" \
      "$(field elapsed "$report")" "$(field user "$report")" "$(field sys "$report")" \
      "$(field ahead_user "$report")" "$(field ahead_sys "$report")" "$(field daemon "$report")" \
      "$(field checksum "$report")" "$(field daemon_ahead "$report")" >>"$CSV"
  done
done
unmount
if [[ $(cut -d, -f10 "$CSV" | tail -n +2 | sort -u | wc -l) != 1 ]]; then
  echo "the modes read different bytes (checksums differ): see $CSV" >&2
  exit 1
fi

col() { median_where "$CSV" "$2" "mode=$1"; }  # col MODE COLUMN: its median
us_per_file() { awk -v s="$1" -v n="$FILES" 'BEGIN {printf "%.1f", s * 1e6 / n}'; }
echo
machine_note
printf 'reading %s files whole, in order; cold; medians of %d; CPU in microseconds per file\n' \
  "$FILES" "$REPEATS"
printf '%-15s %8s %10s %14s %12s %16s %11s\n' mode "wall s" "app/file" "app disclose" \
  "daemon/file" "daemon disclose" "total/file"
for m in "${MODES[@]}"; do
  app=$(awk -F, -v m="$m" 'NR > 1 && $1 == m {print $5 + $6}' "$CSV" | median)
  ahead=$(awk -F, -v m="$m" 'NR > 1 && $1 == m {print $7 + $8}' "$CSV" | median)
  daemon=$(col "$m" 9)
  daemon_ahead=$(col "$m" 11)
  total=$(awk -F, -v m="$m" 'NR > 1 && $1 == m {print $5 + $6 + $9}' "$CSV" | median)
  printf '%-15s %8.3f %10s %14s %12s %16s %11s\n' "$m" "$(col "$m" 4)" "$(us_per_file "$app")" \
    "$(us_per_file "$ahead")" "$(us_per_file "$daemon")" "$(us_per_file "$daemon_ahead")" \
    "$(us_per_file "$total")"
done
echo "runs: $CSV"
