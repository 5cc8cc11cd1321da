#!/usr/bin/env bash
# Model fidelity of the emulated disk array (issue 3): random 64 KiB reads with fio on a mount
# (--direct=1, libaio, --data-cache direct, --readahead off, a cold 1 MiB daemon cache), for 1, 2,
# 4 and 8 disks at queue depths 1, 4 and 16, against what the disk model predicts for the same
# request stream. The prediction comes from tipfs-model-replay, which replays fio's distribution
# (uniform random 64 KiB-aligned offsets, Q reads always in flight) through the mount's stripe
# layout and DiskModel on a fake clock: with random placement, Q reads over N disks do not keep
# all N busy (two reads often land on one disk while another idles), and the replay counts that
# exactly; the product-form formula N/S x Q/(Q+N-1) is printed beside it as a cross-check.
#
# The kernel lets at most max_background (12 unless the daemon raises it) requests of one FUSE
# connection into the daemon at once; deeper fio queues wait in the kernel. The model is given the
# same cap (--inflight-cap N, or read from /sys/fs/fuse/connections when fusectl is mounted, else
# assumed 12), and the uncapped prediction is printed too; the daemon's mean outstanding reads in
# the table show the cap that was really in force.
#
# Every run: drop the page cache, mount afresh (cold daemon cache), fio for --runtime seconds after
# a --ramp of 2 s; the ratio is measured / modelled per run, the table shows medians of --repeats.
#
# Usage: bench/emulation/fidelity.sh [--model hdd] [--disks "1 2 4 8"] [--depths "1 4 16"]
#          [--runtime 10] [--ramp 2] [--repeats 3] [--file-size 512M] [--engine libaio]
#          [--inflight-cap auto|N]
# Output: a table on stdout, bench/results/emulation/fidelity.{csv,txt}.
# shellcheck source=bench/emulation/common.sh
source "$(dirname "$0")/common.sh"

MODEL=hdd DISKS="1 2 4 8" DEPTHS="1 4 16" RUNTIME=10 RAMP=2 REPEATS=3 FILE_SIZE=512M ENGINE=libaio
INFLIGHT_CAP=auto
while (($#)); do
  case $1 in
    --model) MODEL=$2; shift 2 ;;
    --disks) DISKS=$2; shift 2 ;;
    --depths) DEPTHS=$2; shift 2 ;;
    --runtime) RUNTIME=$2; shift 2 ;;
    --ramp) RAMP=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --file-size) FILE_SIZE=$2; shift 2 ;;
    --engine) ENGINE=$2; shift 2 ;;
    --inflight-cap) INFLIGHT_CAP=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
awk -v t="$RUNTIME" 'BEGIN {exit !(t >= 2)}' || { echo "--runtime must be >= 2 s" >&2; exit 2; }
[[ -x $REPLAY ]] || { echo "no $REPLAY: cmake --build $BUILD --target tipfs-model-replay" >&2; exit 1; }
command -v fio >/dev/null || { echo "fio is missing" >&2; exit 1; }
"$REPLAY" --model "$MODEL" --requests 1 --warmup 0 >/dev/null  # a bad model fails here, early
FILE_MB=$(( $(numfmt --from=iec "$FILE_SIZE") / 1048576 ))
MOUNT_ARGS=(--data-cache direct --readahead off --cache-size 256K --disk-model "$MODEL")

# The FUSE in-flight cap of the mounted connection: "N source".
fuse_cap() {
  local dev
  dev=$(stat -c %d "$1")
  if [[ $INFLIGHT_CAP != auto ]]; then
    echo "$INFLIGHT_CAP given"
  elif [[ -r /sys/fs/fuse/connections/$dev/max_background ]]; then
    echo "$(cat "/sys/fs/fuse/connections/$dev/max_background") fusectl"
  else
    echo "12 assumed"
  fi
}

RAW=$WORK/raw  # disks qd repeat measured_mbps model_mbps cap mean_outstanding late hits lat_ms
: > "$RAW"
declare -A MODEL_MBPS UNCAPPED_MBPS ANALYTIC_MBPS MODEL_OUTSTANDING MODEL_LATENCY CAP_SOURCE
for n in $DISKS; do
  name=v$n
  make_volume "$name" "$n"
  mount_volume "$name" --data-cache direct
  dd if=/dev/urandom of="$(mountpoint_of "$name")/file" bs=1M count="$FILE_MB" status=none
  unmount_volume "$name"
  for q in $DEPTHS; do
    for ((r = 0; r < REPEATS; r++)); do
      cold_mount "$name" "${MOUNT_ARGS[@]}"
      mp=$(mountpoint_of "$name")
      read -r cap cap_source < <(fuse_cap "$mp")
      key=$n.$q.$cap
      if [[ -z ${MODEL_MBPS[$key]:-} ]]; then
        line=$("$REPLAY" --model "$MODEL" --disks "$n" --iodepth "$q" --inflight-cap "$cap" \
          --file-size "$FILE_SIZE")
        MODEL_MBPS[$key]=$(tr ' ' '\n' <<< "$line" | awk -F= '$1 == "model_mbps" {print $2}')
        ANALYTIC_MBPS[$key]=$(tr ' ' '\n' <<< "$line" | awk -F= '$1 == "analytic_mbps" {print $2}')
        MODEL_OUTSTANDING[$key]=$(tr ' ' '\n' <<< "$line" |
          awk -F= '$1 == "mean_outstanding" {print $2}')
        MODEL_LATENCY[$key]=$(tr ' ' '\n' <<< "$line" | awk -F= '$1 == "mean_latency_ms" {print $2}')
        UNCAPPED_MBPS[$key]=$("$REPLAY" --model "$MODEL" --disks "$n" --iodepth "$q" \
          --file-size "$FILE_SIZE" | tr ' ' '\n' | awk -F= '$1 == "model_mbps" {print $2}')
        CAP_SOURCE[$key]=$cap_source
      fi
      fio --name=fidelity --filename="$mp/file" --size="$FILE_SIZE" --rw=randread --bs=64k \
        --direct=1 --ioengine="$ENGINE" --iodepth="$q" --norandommap --randrepeat=0 \
        --invalidate=0 --time_based --runtime="$RUNTIME" --ramp_time="$RAMP" --output-format=json \
        > "$WORK/fio.json" &
      fio_pid=$!
      # Two snapshots of the daemon's counters inside fio's run give the mean number of reads
      # outstanding at the disks while it ran (fio's start-up and exit left out).
      nap "$(awk -v r="$RAMP" 'BEGIN {print r + 0.5}')"
      before=$(cat "$mp/.tipfs/stats.json")
      nap "$(awk -v t="$RUNTIME" 'BEGIN {print t - 1}')"
      after=$(cat "$mp/.tipfs/stats.json")
      wait "$fio_pid"
      measured=$(jq '.jobs[0].read.bw_bytes / 1e6' "$WORK/fio.json")
      latency=$(jq '.jobs[0].read.lat_ns.mean / 1e6' "$WORK/fio.json")
      outstanding=$(jq -n --argjson a "$before" --argjson b "$after" \
        '(([$b.disks[].queue_depth_seconds_total] | add) - ([$a.disks[].queue_depth_seconds_total] | add))
         / ($b.disks[0].elapsed_seconds_total - $a.disks[0].elapsed_seconds_total)')
      # Since the mount: completions the backing store held past the model's deadline, and block
      # reads served without a disk read of their own (cache hits, and reads of a block already
      # being fetched, which join that fetch): the model has neither, and with a 256 KiB cache and
      # a file of thousands of blocks they are rare.
      final=$(cat "$mp/.tipfs/stats.json")
      late=$(jq '[.disks[].late_total] | add' <<< "$final")
      hits=$(jq '."demand.reads" - ([.disks[].reads_total] | add)' <<< "$final")
      echo "$n $q $r $measured ${MODEL_MBPS[$key]} $cap $outstanding $late $hits $latency" >> "$RAW"
      printf '  %d disks, QD %2d, run %d: %7.3f MB/s measured, %7.3f modelled\n' \
        "$n" "$q" "$r" "$measured" "${MODEL_MBPS[$key]}" >&2
      unmount_volume "$name"
    done
  done
  rm -rf "${WORK:?}/$name"  # done with this volume: free its space for the next
done

CSV=$RESULTS/fidelity.csv
TXT=$RESULTS/fidelity.txt
{
  echo "disks,iodepth,in_flight_cap,cap_source,measured_mbps,model_mbps,ratio,ratio_min,ratio_max,model_uncapped_mbps,analytic_mbps,daemon_mean_outstanding,model_mean_outstanding,fio_mean_latency_ms,model_mean_latency_ms,late_completions,reads_without_disk,runs"
  for n in $DISKS; do
    for q in $DEPTHS; do
      rows=$(awk -v n="$n" -v q="$q" '$1 == n && $2 == q' "$RAW")
      cap=$(awk 'NR == 1 {print $6}' <<< "$rows")
      key=$n.$q.$cap
      measured=$(awk '{print $4}' <<< "$rows" | median)
      ratios=$(awk '{printf "%.4f\n", $4 / $5}' <<< "$rows")
      ratio=$(median <<< "$ratios")
      rmin=$(sort -g <<< "$ratios" | head -1)
      rmax=$(sort -g <<< "$ratios" | tail -1)
      outstanding=$(awk '{print $7}' <<< "$rows" | median)
      late=$(awk '{s += $8} END {print s}' <<< "$rows")
      hits=$(awk '{s += $9} END {print s}' <<< "$rows")
      latency=$(awk '{print $10}' <<< "$rows" | median)
      echo "$n,$q,$cap,${CAP_SOURCE[$key]},$measured,${MODEL_MBPS[$key]},$ratio,$rmin,$rmax,${UNCAPPED_MBPS[$key]},${ANALYTIC_MBPS[$key]},$outstanding,${MODEL_OUTSTANDING[$key]},$latency,${MODEL_LATENCY[$key]},$late,$hits,$(wc -l <<< "$rows")"
    done
  done
} > "$CSV"

{
  printf 'model fidelity: %s, random 64 KiB reads (fio %s, direct), %s file, %d s runs, medians of %d\n' \
    "$MODEL" "$ENGINE" "$FILE_SIZE" "$RUNTIME" "$REPEATS"
  printf '%5s %4s %4s %9s %9s %6s %12s %9s %9s %7s %7s %7s %7s %5s %4s\n' disks QD cap measured \
    modelled ratio "(min-max)" uncapped analytic "qd meas" "qd mod" "lat ms" "lat mod" late hits
  tail -n +2 "$CSV" | while IFS=, read -r n q cap _ meas model ratio rmin rmax unc ana qdm qdmod lat latmod late hits _; do
    printf '%5s %4s %4s %9.3f %9.3f %6.3f %12s %9.3f %9.3f %7.2f %7.2f %7.2f %7.2f %5s %4s\n' \
      "$n" "$q" "$cap" "$meas" "$model" "$ratio" "$(printf '%.3f-%.3f' "$rmin" "$rmax")" "$unc" \
      "$ana" "$qdm" "$qdmod" "$lat" "$latmod" "$late" "$hits"
  done
  echo "MB/s (10^6 B/s). modelled: tipfs-model-replay with the in-flight cap; uncapped: without it;"
  echo "analytic: N/S x Q'/(Q'+N-1). qd: mean reads outstanding at the disks (daemon / model)."
  echo "lat: mean submission-to-completion time of one read (fio / model, Little's law)."
  echo "late: completions the backing store held past the model; hits: reads that needed no disk"
  echo "read of their own (daemon cache hits, or joined a fetch of the same block in flight)."
  echo "cap source: $(cut -d, -f4 "$CSV" | tail -n +2 | sort -u | tr '\n' ' ')"
} | tee "$TXT"
echo "results: $CSV $TXT"
