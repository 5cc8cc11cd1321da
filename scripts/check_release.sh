#!/usr/bin/env bash
# Builds what a user or packager builds, `cmake -DCMAKE_BUILD_TYPE=Release` (g++ -O3), with
# -Werror, so that a warning only the optimiser reports (g++ 12's false -Wrestrict at -O3 was
# one) is seen here first. The libraries, the tipfs binary and libtipspec are enough; the tests
# are built and run in the default build.
#   BUILD_DIR  where to build (default: build-release)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-release}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DTIPFS_WERROR=ON "${launcher[@]}" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" --target tipfs tipspec
echo "check_release: Release build of tipfs and libtipspec clean with -Werror (g++ -Wrestrict warned only)"
