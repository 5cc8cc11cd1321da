#!/usr/bin/env bash
# Foundation benchmark (issue 2). Side by side in one run, warm caches:
#   - sequential 128 KiB and 4 KiB reads of a 1 GiB file, natively (on the backing file system)
#     and through tipfs in both data-cache modes (kernel: page cache on top; direct: every read
#     reaches the daemon, served from its block cache);
#   - create + stat + unlink of 10,000 files.
# Each measurement is repeated REPEATS times (default 3); the table shows medians and the ratio
# tipfs / native (throughput) or native / tipfs (metadata: higher is better for tipfs).
# Usage: bench/foundation/run.sh [--size 1G] [--files 10000] [--repeats 3]
set -euo pipefail
cd "$(dirname "$0")/../.."
SIZE=1G FILES=10000 REPEATS=3
while (($#)); do
  case $1 in
    --size) SIZE=$2; shift 2 ;;
    --files) FILES=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
BENCH_NAME=foundation
source bench/lib/scratch_volume.sh  # BUILD, TIPFS, WORK, MNT, DISKS, median, cleanup
CHURN=$BUILD/bench/foundation/metadata_churn
need "$CHURN"
command -v fio >/dev/null || { echo "fio is missing: scripts/setup.sh installs it" >&2; exit 1; }
mkdir -p "$WORK/native"
"$TIPFS" mkfs "${DISKS[@]}" >/dev/null

mount_tipfs() {  # $1: data-cache mode
  findmnt -n "$MNT" >/dev/null && "$TIPFS" umount "$MNT"
  "$TIPFS" mount --data-cache "$1" --cache-size 1536M "${DISKS[0]}" "$MNT"
}

# MB/s of one sequential read pass with block size $2 over file $1.
read_mbps() {
  fio --name=seq --filename="$1" --rw=read --bs="$2" --ioengine=psync --numjobs=1 \
    --output-format=terse --terse-version=3 | awk -F';' '{printf "%.1f\n", $7/1024}'
}

mount_tipfs kernel
head -c "$SIZE" /dev/urandom > "$WORK/native/file"
cp "$WORK/native/file" "$MNT/file"

declare -A RESULT
for mode in kernel direct; do
  mount_tipfs "$mode"
  cat "$MNT/file" "$WORK/native/file" > /dev/null  # warm every cache
  for bs in 128k 4k; do
    for ((r = 0; r < REPEATS; r++)); do
      echo "native $bs $(read_mbps "$WORK/native/file" "$bs")" >> "$WORK/reads.$mode"
      echo "tipfs $bs $(read_mbps "$MNT/file" "$bs")" >> "$WORK/reads.$mode"
    done
  done
  for bs in 128k 4k; do
    RESULT[native.$mode.$bs]=$(awk -v b=$bs '$1=="native" && $2==b {print $3}' "$WORK/reads.$mode" | median)
    RESULT[tipfs.$mode.$bs]=$(awk -v b=$bs '$1=="tipfs" && $2==b {print $3}' "$WORK/reads.$mode" | median)
  done
done

mount_tipfs kernel
mkdir -p "$MNT/churn" "$WORK/native/churn"
for ((r = 0; r < REPEATS; r++)); do
  echo "native $("$CHURN" "$WORK/native/churn" "$FILES")" >> "$WORK/meta"
  echo "tipfs $("$CHURN" "$MNT/churn" "$FILES")" >> "$WORK/meta"
done
META_NATIVE=$(awk '$1=="native" {print $2}' "$WORK/meta" | median)
META_TIPFS=$(awk '$1=="tipfs" {print $2}' "$WORK/meta" | median)

printf '\nfoundation benchmark: %s file, 4 disks, medians of %d (MB/s; seconds for metadata)\n' "$SIZE" "$REPEATS"
printf '%-34s %10s %10s %8s\n' "measurement" native tipfs ratio
for mode in kernel direct; do
  for bs in 128k 4k; do
    n=${RESULT[native.$mode.$bs]} t=${RESULT[tipfs.$mode.$bs]}
    printf '%-34s %10s %10s %8.2f\n' "seq read $bs, --data-cache $mode" "$n" "$t" "$(echo "$t $n" | awk '{print $1/$2}')"
  done
done
printf '%-34s %10s %10s %8.2f\n' "create+stat+unlink $FILES files" "$META_NATIVE" "$META_TIPFS" \
  "$(echo "$META_NATIVE $META_TIPFS" | awk '{print $1/$2}')"
