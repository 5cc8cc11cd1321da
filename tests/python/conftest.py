"""Fixtures for the Python package's tests: real tipfs volumes, mounted and always unmounted.

ctest runs these with Debian's /usr/bin/python3 -m pytest (label "python"), passing the tipfs
binary under test in TIPFS_BINARY. Volumes live under TMPDIR (scripts/lib/test_tmp.sh gives each
test run its own), each mount with --allow-other (other users' processes take part in the tests)
and --data-cache direct, so every read reaches the daemon and its counters are exact.
"""

import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))
NOBODY = 65534


def tipfs_binary() -> str:
    return os.environ.get("TIPFS_BINARY", str(REPO / "build" / "cli" / "tipfs"))


def fuse_unavailable() -> str:
    if os.geteuid() != 0:
        return "not root (the tests mount FUSE and run processes as another user)"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if not os.access(tipfs_binary(), os.X_OK):
        return f"no tipfs binary at {tipfs_binary()} (set TIPFS_BINARY)"
    return ""


class Volume:
    """A 4-disk tipfs volume under a fresh temporary directory, mounted at `mountpoint`."""

    def __init__(self, mount_args=("--cache-size", "12M", "--data-cache", "direct")):
        self.root = Path(tempfile.mkdtemp(prefix="tipfs-py-"))
        os.chmod(self.root, 0o755)  # other users' processes walk to the mount
        self.disks = [self.root / f"disk{i}" for i in range(4)]
        self.mountpoint = self.root / "mnt"
        self.native = self.root / "native"  # the same files on the native file system
        for d in self.disks + [self.mountpoint, self.native]:
            d.mkdir()
        self.mounted = False
        self._run("mkfs", *map(str, self.disks))
        self.mount(mount_args)
        os.chmod(self.mountpoint, 0o755)

    def mount(self, mount_args) -> None:
        """Mounts the volume (again, after unmount(): a fresh daemon and an empty page cache)."""
        self._run("mount", "--allow-other", *mount_args, str(self.disks[0]), str(self.mountpoint))
        self.mounted = True

    def _run(self, *args: str) -> None:
        done = subprocess.run([tipfs_binary(), *args], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"tipfs {args[0]} failed: {done.stdout}{done.stderr}")

    def unmount(self) -> None:
        if self.mounted:
            done = subprocess.run([tipfs_binary(), "umount", str(self.mountpoint)],
                                  capture_output=True, text=True)
            if done.returncode != 0:  # never leave a mount behind, also when the daemon hangs
                subprocess.run(["umount", "-l", str(self.mountpoint)], capture_output=True)
            self.mounted = False

    def remove(self) -> None:
        self.unmount()
        shutil.rmtree(self.root, ignore_errors=True)

    def stats(self) -> dict:
        import tipfs
        return tipfs.stats(self.mountpoint)


def make_samples(directory: Path, count: int, seed: int, max_bytes: int = 150_000) -> list:
    """`count` sample files of random sizes (some span several cache blocks) and contents, in
    class folders as loaders find them; world-readable. Returns their paths in index order."""
    rng = random.Random(seed)
    paths = []
    for i in range(count):
        folder = directory / f"c{i % 4:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"s{i:05d}.bin"
        path.write_bytes(rng.randbytes(rng.randint(1, max_bytes)))
        os.chmod(path, 0o644)
        paths.append(str(path))
    return paths


@pytest.fixture(scope="module")
def volume():
    reason = fuse_unavailable()
    if reason:
        pytest.skip(reason)
    v = Volume()
    try:
        yield v
    finally:
        v.remove()


@pytest.fixture(scope="module")
def samples(volume):
    """192 sample files on the volume (their bytes also kept to compare with)."""
    return make_samples(volume.mountpoint / "samples", 192, seed=12)


def delta(before: dict, after: dict, key: str) -> float:
    return after.get(key, 0) - before.get(key, 0)
