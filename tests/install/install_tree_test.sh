#!/usr/bin/env bash
# The install tree, as a user or a packager gets it: `cmake --install` of this build into a
# DESTDIR holds the binary, libtipspec, the headers, the pkg-config files, the man pages and the
# bash completion; tipfs_hint(3)'s EXAMPLE, exactly as the man page prints it, builds with
# `cc -std=c99 $(pkg-config --cflags --libs tipfs)` and prints its own counters on a mount made
# by the installed tipfs; the installed `tipfs run` preloads the installed libtipspec; a program
# using libtipspec builds against its pkg-config file. Leaves nothing mounted.
#   install_tree_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
BUILD=$(realpath "$1")
SRC=$(realpath "$2")
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tipfs-install-XXXXXX")
P=$WORK/root/usr/local
cleanup() {
  if findmnt -n "$WORK/mnt" >/dev/null 2>&1; then
    "$P/bin/tipfs" umount "$WORK/mnt" 2>/dev/null || umount -l "$WORK/mnt" || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

DESTDIR=$WORK/root cmake --install "$BUILD" --prefix /usr/local >/dev/null
for f in bin/tipfs lib/libtipspec.so include/tipfs/hint.h include/tipfs/hint.hpp \
  include/tipfs/spec.h lib/pkgconfig/tipfs.pc lib/pkgconfig/libtipspec.pc \
  share/man/man8/tipfs.8 share/man/man3/tipfs_hint.3 share/man/man3/libtipspec.3 \
  share/bash-completion/completions/tipfs; do
  [[ -e $P/$f ]] || fail "cmake --install did not install $f"
done
version=$("$P/bin/tipfs" --version)
[[ $version =~ ^tipfs\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "tipfs --version printed '$version'"

# Man pages render without a warning.
for page in man8/tipfs.8 man3/tipfs_hint.3 man3/libtipspec.3; do
  warnings=$(MANWIDTH=100 man --warnings -l "$P/share/man/$page" 2>&1 >/dev/null || true)
  [[ -z $warnings ]] || fail "man $page: $warnings"
done

# The relocatable .pc files point into the DESTDIR tree.
export PKG_CONFIG_PATH=$P/lib/pkgconfig
cflags=$(pkg-config --cflags tipfs)
include_dir=${cflags#-I}
include_dir=$(realpath "${include_dir%% *}")
[[ $include_dir == "$P/include" ]] || fail "pkg-config --cflags tipfs gave '$cflags'"

# The example of tipfs_hint(3) as printed (roff escapes undone), built as the page says.
awk '/^\.SH EXAMPLE/ {e = 1} e && /^\.EX/ {x = 1; next} x && /^\.EE/ {exit} x' \
  "$P/share/man/man3/tipfs_hint.3" | sed -e 's/\\e/\\/g' -e 's/\\-/-/g' >"$WORK/example.c"
grep -q 'tipfs_hint_files' "$WORK/example.c" || fail "no example found in tipfs_hint(3)"
cc -std=c99 -Wall -Wextra -pedantic -Werror -o "$WORK/example" "$WORK/example.c" \
  $(pkg-config --cflags --libs tipfs) || fail "the tipfs_hint(3) example does not build with cc -std=c99"

# A C++ program with hint.hpp (C++20) and one with libtipspec through their pkg-config files.
cat >"$WORK/hinter.cc" <<'CC'
#include <tipfs/hint.hpp>
int main() { tipfs::Hinter hinter(-1); (void)hinter; return 0; }
CC
c++ -std=c++20 -Wall -Werror -o "$WORK/hinter" "$WORK/hinter.cc" $(pkg-config --cflags --libs tipfs) \
  || fail "hint.hpp does not build with c++ -std=c++20"
cat >"$WORK/spec.c" <<'C'
#include <stdio.h>
#include <tipfs/spec.h>
int main(void) {
  struct tipspec_counters c;
  printf("query %d\n", tipspec_query(&c));
  return 0;
}
C
cc -std=c99 -Wall -Werror -o "$WORK/spec" "$WORK/spec.c" $(pkg-config --cflags --libs libtipspec) \
  || fail "a libtipspec program does not build against libtipspec.pc"
LD_LIBRARY_PATH=$P/lib "$WORK/spec" | grep -q '^query' || fail "the libtipspec program did not run"

# The installed binary on a real mount: the example reads and reports its own stream.
mkdir -p "$WORK"/d{0,1,2,3} "$WORK/mnt"
"$P/bin/tipfs" mkfs "$WORK"/d{0,1,2,3} >/dev/null
"$P/bin/tipfs" mount --cache-size 16M "$WORK/d0" "$WORK/mnt"
for i in 1 2 3; do head -c 300000 /dev/urandom >"$WORK/mnt/f$i"; done
"$P/bin/tipfs" umount "$WORK/mnt"
"$P/bin/tipfs" mount --cache-size 16M --data-cache direct "$WORK/d0" "$WORK/mnt"
out=$("$WORK/example" "$WORK/mnt" f1 f2 f3)
[[ $out =~ ^900000\ bytes\ read\;\ [0-9]+\ hinted\ blocks\ prefetched,\ [0-9]+\ of\ them\ used\;\ stalled ]] \
  || fail "the example printed '$out'"
preload=$("$P/bin/tipfs" run -- sh -c 'echo "$LD_PRELOAD"')
[[ $preload == "$P/lib/libtipspec.so"* ]] || fail "installed tipfs run preloaded '$preload'"
"$P/bin/tipfs" umount "$WORK/mnt"
echo "install tree: OK ($version)"
