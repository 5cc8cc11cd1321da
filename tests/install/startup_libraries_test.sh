#!/usr/bin/env bash
# What a tipfs process loads before main(): not librados (nor libceph-common and its
# dependencies), which tipfs opens only when a volume has a RADOS disk (stripe/rados_library.h);
# and a RADOS disk still reaches librados (a conf file naming no monitor: its connect fails).
# libtipspec, loaded into every process `tipfs run` starts, needs nothing beyond libc (its C++
# runtime is linked in, hidden), so a C program such as ld maps no libstdc++ for it.
#   startup_libraries_test.sh TIPFS LIBTIPSPEC
set -euo pipefail
TIPFS=$1
LIBTIPSPEC=$2
fail() { echo "FAIL: $*" >&2; exit 1; }

needed=$(readelf -d "$LIBTIPSPEC" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
for lib in $needed; do
  case $lib in
    libc.so.* | ld-linux*.so.*) ;;
    *) fail "libtipspec.so needs $lib (needed: $needed)" ;;
  esac
done

loaded=$(LD_TRACE_LOADED_OBJECTS=1 "$TIPFS")
if grep -E 'librados|libceph' <<<"$loaded"; then
  fail "tipfs loads librados at start (it needs it only for RADOS disks)"
fi
LD_DEBUG=libs "$TIPFS" --version 2>"${TMPDIR:-/tmp}/tipfs-startup-$$" >/dev/null
if grep -q 'librados' "${TMPDIR:-/tmp}/tipfs-startup-$$"; then
  rm -f "${TMPDIR:-/tmp}/tipfs-startup-$$"
  fail "tipfs --version opened librados"
fi
rm -f "${TMPDIR:-/tmp}/tipfs-startup-$$"

meta=$(mktemp -d "${TMPDIR:-/tmp}/tipfs-startup-XXXXXX")
trap 'rm -rf "$meta"' EXIT
libraries=$(ldconfig -p 2>/dev/null || true)
if ! grep -q 'librados.so.2 ' <<<"$libraries"; then
  echo "librados.so.2 not installed: the RADOS half is skipped"; exit 0
fi
printf '[global]\n' >"$meta/ceph.conf"
out=$(timeout 120 "$TIPFS" mkfs --meta "$meta" "rados:nopool?conf=$meta/ceph.conf" 2>&1) &&
  fail "mkfs on a RADOS disk of a conf file naming no monitor succeeded"
grep -q "connect to the monitors" <<<"$out" ||
  fail "mkfs on a RADOS disk did not reach librados: '$out'"
echo "ok"
