#!/usr/bin/env bash
# Gap sweep in the style of Figure 5.10 of Martin's sensitivity study (seed 002): how throughput
# responds as the per-byte Gap G (1/bandwidth of each disk) grows, on top of a disk profile, for
#   - a sequential reader: one big file read front to back with 1 MiB reads (dd), and
#   - a small-file reader: many 8-32 KiB files read one after another (one cat over all of them).
# Both run as a user would: the default mount (kernel page cache, daemon read-ahead on), cold:
# every run drops the page cache and mounts afresh. The sequential reader moves bytes in bursts
# and should follow G closely once G is above the software's own per-byte cost; the small-file
# reader pays a positioning per file and should hardly notice G until a file's transfer rivals it
# (as SPECsfs, sending at a controlled rate, hardly noticed Gap in the study).
#
# Beside each measurement, a bound from the model alone: for the small-file reader, one random
# access per file (positioning + size rounded up to 4 KiB x G, the cache's fetch of a file's last
# block), one file at a time; for the sequential reader, the array's media rate N / G.
#
# Usage: bench/emulation/gap_sweep.sh [--model hdd] [--gaps "0 10 25 50 100 250 500"]
#          [--disks 4] [--seq-size 64M] [--files 400] [--repeats 3]
#        bench/emulation/gap_sweep.sh --replot   # gap_sweep.png again from gap_sweep.csv
# Output: a table, bench/results/emulation/gap_sweep.{csv,txt} and gap_sweep.png (gnuplot).
# shellcheck source=bench/emulation/common.sh
source "$(dirname "$0")/common.sh"

MODEL=hdd GAPS="0 10 25 50 100 250 500" DISKS=4 SEQ_SIZE=64M FILES=400 REPEATS=3 REPLOT=0
while (($#)); do
  case $1 in
    --model) MODEL=$2; shift 2 ;;
    --gaps) GAPS=$2; shift 2 ;;
    --disks) DISKS=$2; shift 2 ;;
    --seq-size) SEQ_SIZE=$2; shift 2 ;;
    --files) FILES=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --replot) REPLOT=1; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
CSV=$RESULTS/gap_sweep.csv
TXT=$RESULTS/gap_sweep.txt
PNG=$RESULTS/gap_sweep.png
# plot: gap_sweep.png from gap_sweep.csv.
plot() {
  # One data file per reader for gnuplot: index, G, measured, bound (missing as NaN).
  for reader in sequential small; do
    awk -F, -v x="$reader" 'NR > 1 && $2 == x {print NR, $1, $3, ($5 == "" ? "NaN" : $5), $4}' "$CSV" |
      awk '{print NR - 1, $2, $3, $4, $5}' > "$WORK/$reader.dat"
  done
  gnuplot <<EOF
set terminal pngcairo size 1200,500 font ",11"
set output "$PNG"
SEQ = "#8b1a9e"
SMALL = "#00876c"
set multiplot layout 1,2 title "Gap sweep: $MODEL, $DISKS disks, G (ns per byte) varied; cold reads, medians of $REPEATS"
set xlabel "G, ns per byte (1000/G = MB/s per disk)"
set grid
set key top right
set logscale y
set ylabel "throughput, MB/s"
set title "throughput"
plot "$WORK/sequential.dat" using 1:3:xtic(2) with linespoints lw 2 pt 7 lc rgb SEQ title "sequential reader", \
     "$WORK/sequential.dat" using 1:4 with lines dt 2 lc rgb SEQ title "N/G (media rate bound)", \
     "$WORK/small.dat" using 1:3 with linespoints lw 2 pt 5 lc rgb SMALL title "small-file reader", \
     "$WORK/small.dat" using 1:4 with lines dt 2 lc rgb SMALL title "small files, disk time only"
unset logscale y
set yrange [0:*]
set ylabel "throughput relative to G = $(awk -F, 'NR == 2 {print $1}' "$CSV")"
set title "sensitivity"
plot "$WORK/sequential.dat" using 1:5:xtic(2) with linespoints lw 2 pt 7 lc rgb SEQ title "sequential reader", \
     "$WORK/small.dat" using 1:5 with linespoints lw 2 pt 5 lc rgb SMALL title "small-file reader"
unset multiplot
EOF
}
if ((REPLOT)); then
  plot
  echo "plot: $PNG"
  exit 0
fi
[[ -x $REPLAY ]] || { echo "no $REPLAY: cmake --build $BUILD --target tipfs-model-replay" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "gnuplot is missing" >&2; exit 1; }
[[ $MODEL != *G=* && $MODEL != *bw=* ]] || { echo "--model must not set G or bw: the sweep does" >&2; exit 2; }
spec_for() { echo "$MODEL,G=$([[ $1 == 0 ]] && echo 0 || echo "${1}ns")"; }
for g in $GAPS; do "$REPLAY" --model "$(spec_for "$g")" --service-only >/dev/null; done  # fail early
SEQ_MB=$(( $(numfmt --from=iec "$SEQ_SIZE") / 1048576 ))

make_volume gap "$DISKS"
mount_volume gap
MP=$(mountpoint_of gap)
dd if=/dev/urandom of="$MP/seq" bs=1M count="$SEQ_MB" status=none
write_small_files "$MP/small" "$FILES" 1 > "$WORK/sizes"
SMALL_BYTES=$(awk '{s += $1} END {print s}' "$WORK/sizes")
unmount_volume gap

# seconds_of COMMAND...: wall seconds of one run.
seconds_of() {
  local t0 t1
  t0=$(now_ns)
  "$@"
  t1=$(now_ns)
  awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.6f\n", (b - a) / 1e9}'
}
read_sequential() { dd if="$MP/seq" of=/dev/null bs=1M status=none; }
read_small_files() { cat "$MP"/small/f* > /dev/null; }

RAW=$WORK/raw  # gap reader repeat mbps
: > "$RAW"
for g in $GAPS; do
  spec=$(spec_for "$g")
  for ((r = 0; r < REPEATS; r++)); do
    # Both readers side by side in each repeat, in alternating order.
    readers=(sequential small)
    ((r % 2)) && readers=(small sequential)
    for reader in "${readers[@]}"; do
      cold_mount gap --disk-model "$spec"
      if [[ $reader == sequential ]]; then
        s=$(seconds_of read_sequential)
        mbps=$(awk -v b="$SEQ_MB" -v s="$s" 'BEGIN {printf "%.4f", b * 1048576 / s / 1e6}')
      else
        s=$(seconds_of read_small_files)
        mbps=$(awk -v b="$SMALL_BYTES" -v s="$s" 'BEGIN {printf "%.4f", b / s / 1e6}')
      fi
      echo "$g $reader $r $mbps" >> "$RAW"
      printf '  G=%s ns/B %-10s run %d: %8.3f MB/s\n' "$g" "$reader" "$r" "$mbps" >&2
      unmount_volume gap
    done
  done
done

# Model bounds.
model_bound() {  # gap reader -> MB/s, or "" where the model sets no bound
  local g=$1 reader=$2 line pos per_byte
  line=$("$REPLAY" --model "$(spec_for "$g")" --service-only)
  pos=$(tr ' ' '\n' <<< "$line" | awk -F= '$1 == "positioning_ms" {print $2}')
  per_byte=$(tr ' ' '\n' <<< "$line" | awk -F= '$1 == "per_byte_ns" {print $2}')
  if [[ $reader == small ]]; then
    awk -v p="$pos" -v G="$per_byte" '{t += p * 1e6 + int(($1 + 4095) / 4096) * 4096 * G; b += $1}
      END {printf "%.4f", b / t * 1e3}' "$WORK/sizes"
  else
    awk -v n="$DISKS" -v G="$per_byte" 'BEGIN {if (G > 0) printf "%.4f", n / G * 1e3}'
  fi
}

{
  echo "gap_ns_per_byte,reader,measured_mbps,relative_to_g0,model_bound_mbps,min_mbps,max_mbps,runs"
  for reader in sequential small; do
    base=$(awk -v g="${GAPS%% *}" -v x="$reader" '$1 == g && $2 == x {print $4}' "$RAW" | median)
    for g in $GAPS; do
      values=$(awk -v g="$g" -v x="$reader" '$1 == g && $2 == x {print $4}' "$RAW")
      m=$(median <<< "$values")
      echo "$g,$reader,$m,$(awk -v m="$m" -v b="$base" 'BEGIN {printf "%.4f", m / b}'),$(model_bound "$g" "$reader"),$(sort -g <<< "$values" | head -1),$(sort -g <<< "$values" | tail -1),$(wc -l <<< "$values")"
    done
  done
} > "$CSV"

{
  printf 'Gap sweep: %s with G varied, %d disks; sequential: one %s file (dd bs=1M); small: %d files of 8-32 KiB (%s); cold runs, medians of %d\n' \
    "$MODEL" "$DISKS" "$SEQ_SIZE" "$FILES" "$(numfmt --to=iec "$SMALL_BYTES")" "$REPEATS"
  printf '%8s %10s %12s %9s %12s\n' "G ns/B" reader "MB/s" "vs G=0" "model bound"
  tail -n +2 "$CSV" | while IFS=, read -r g reader m rel bound _; do
    printf '%8s %10s %12.3f %9.3f %12s\n' "$g" "$reader" "$m" "$rel" "${bound:--}"
  done
  echo "model bound: small = one positioning + transfer per file, one file at a time (no software"
  echo "time); sequential = N disks / G, the array's media rate (none at G=0)."
} | tee "$TXT"

plot
echo "results: $CSV $TXT"
echo "plot: $PNG"
