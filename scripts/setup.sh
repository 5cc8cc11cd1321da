#!/usr/bin/env bash
# Installs what tipfs needs on Debian 12 (as root, or through sudo), configures and builds, then
# installs tipfs under PREFIX (so `tipfs` is on PATH and mount(8) finds it for fstab lines).
# Safe to run again: packages already present are not reinstalled, the build is incremental.
#   BUILD_DIR   where to build (default: build)
#   BUILD_TYPE  CMake build type (default: RelWithDebInfo)
#   TIPFS_SANITIZE  address | thread | empty
#   TIPFS_WERROR    ON makes warnings errors (scripts/test.sh sets it; default OFF)
#   PREFIX      where to install (default: /usr/local); TIPFS_INSTALL=0 skips installing
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(build-essential cmake pkg-config git fuse3 libfuse3-dev librocksdb-dev liburing-dev
  libcli11-dev libgtest-dev libgmock-dev libseccomp-dev gnuplot-nox fio hyperfine tre-agrep
  binutils man-db python3 attr ccache curl
  # tests/python: Debian's pytest and PyTorch (about 140 MiB to download, 600 MiB installed),
  # venv and setuptools for its `pip install ./python` check
  python3-pytest python3-torch python3-venv python3-setuptools python3-pip
  # RADOS disks: librados' headers, and a one-node cluster for their tests (scripts/ceph-dev.sh)
  librados-dev ceph-mon ceph-osd)

source scripts/lib/packages.sh
ensure_packages "${PACKAGES[@]}"

BUILD_DIR=${BUILD_DIR:-build}
# ccache makes the second and later builds of a tree (and of its worktrees) cheap.
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" \
  -DTIPFS_SANITIZE="${TIPFS_SANITIZE:-}" -DTIPFS_WERROR="${TIPFS_WERROR:-OFF}" \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
  -DCMAKE_C_COMPILER_LAUNCHER=ccache >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"

if [[ ${TIPFS_INSTALL:-1} != 0 && -z ${TIPFS_SANITIZE:-} ]]; then
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  $SUDO cmake --install "$BUILD_DIR" --prefix "${PREFIX:-/usr/local}" --strip >/dev/null
  echo "setup: installed tipfs $("${PREFIX:-/usr/local}/bin/tipfs" --version | cut -d' ' -f2) under ${PREFIX:-/usr/local}"
fi
