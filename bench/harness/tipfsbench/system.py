"""The machine side of the harness: where the built programs are, tipfs volumes (mkfs, cold
mounts, unmounts), the page cache, and running one command with a timeout.

Every volume this module makes is recorded in a VolumeSet, whose close() unmounts and removes
them all; run.py calls it on exit, on an error and on SIGINT/SIGTERM, so no mount outlives the
harness. Not thread-safe: the harness runs one measurement at a time on purpose (a second
program would steal the disks and the CPU of the one being measured).
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

REPO = Path(__file__).resolve().parents[3]


class HarnessError(Exception):
    """A problem that stops the harness (a missing program, a mount that failed)."""


@dataclass(frozen=True)
class Tools:
    """Absolute paths of the programs the harness runs."""

    tipfs: Path
    gen: Path
    agrep: Path
    gnuld: Path
    xdataslice: Path
    loader: Path
    libtipspec: Path
    build: Path

    @staticmethod
    def find(build_dir: str) -> "Tools":
        build = Path(build_dir)
        if not build.is_absolute():
            build = REPO / build
        workloads = build / "bench" / "workloads"
        tools = Tools(
            tipfs=build / "cli" / "tipfs",
            gen=workloads / "tipfs-bench-gen",
            agrep=workloads / "tipfs-bench-agrep",
            gnuld=workloads / "tipfs-bench-gnuld",
            xdataslice=workloads / "tipfs-bench-xdataslice",
            loader=workloads / "tipfs-bench-loader",
            libtipspec=build / "speculate" / "libtipspec.so",
            build=build,
        )
        missing = [p for p in (tools.tipfs, tools.gen, tools.agrep, tools.gnuld, tools.xdataslice,
                               tools.loader, tools.libtipspec) if not p.exists()]
        if missing:
            names = " ".join(p.name for p in missing)
            raise HarnessError(
                f"missing {', '.join(map(str, missing))}: build them first: cmake --build {build} "
                f"--target tipfs tipspec tipfs-bench-gen tipfs-bench-agrep tipfs-bench-gnuld "
                f"tipfs-bench-xdataslice tipfs-bench-loader -j2   (missing: {names})")
        return tools


def check_prerequisites(need_gnuplot: bool) -> None:
    """Refuses to start where the measurements could not be what they claim."""
    if os.geteuid() != 0:
        raise HarnessError("run as root: the harness drops the page cache before every cold run "
                           "(/proc/sys/vm/drop_caches) and mounts FUSE")
    if not Path("/dev/fuse").exists():
        raise HarnessError("/dev/fuse is missing: FUSE is not available on this machine")
    if need_gnuplot and shutil.which("gnuplot") is None:
        raise HarnessError("gnuplot is missing (apt-get install gnuplot-nox), or pass --no-plots")


def drop_page_cache() -> None:
    """Writes dirty pages back, then drops clean page cache, dentries and inodes, so the next
    run reads its data from the backing files' storage, not from memory."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w", encoding="ascii") as f:
        f.write("3\n")


def load_average() -> float:
    with open("/proc/loadavg", encoding="ascii") as f:
        return float(f.read().split()[0])


def is_mounted(path: Path) -> bool:
    """True if PATH is a mount point (from /proc/self/mountinfo, which never blocks on a dead
    FUSE daemon the way stat() can)."""
    target = str(path)
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 4 and fields[4].replace("\\040", " ") == target:
                return True
    return False


def run_checked(argv: Sequence[str], what: str, cwd: Optional[Path] = None,
                timeout: float = 600) -> str:
    """Runs a short helper command; its stdout, or HarnessError naming WHAT and its stderr."""
    try:
        done = subprocess.run(list(map(str, argv)), cwd=cwd, capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:
        raise HarnessError(f"{what}: no answer after {timeout:.0f} s "
                           f"({' '.join(map(str, argv))})") from e
    if done.returncode != 0:
        raise HarnessError(f"{what} failed (exit {done.returncode}): {done.stderr.strip()}")
    return done.stdout


@dataclass
class Measured:
    """One timed process: exit status (None on a timeout), wall seconds, output paths."""

    returncode: Optional[int]
    seconds: float
    cpu_seconds: float  # user + system of the program and every descendant it waited for
    stdout: Path
    stderr: Path


def run_timed(argv: Sequence[str], cwd: Path, stdout: Path, stderr: Path, timeout: float,
              env: Optional[dict] = None) -> Measured:
    """Runs ARGV in its own session and measures its wall time. On a timeout the whole session
    (the program and anything it forked, such as speculating children) is killed."""
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        process = subprocess.Popen(list(map(str, argv)), cwd=cwd, stdout=out, stderr=err,
                                   stdin=subprocess.DEVNULL, start_new_session=True, env=env)
        try:
            code: Optional[int] = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
            _kill_session(process)
        except BaseException:
            # Interrupted (Ctrl-C, SIGTERM): the program must not outlive the harness, which is
            # about to unmount the volume under it.
            _kill_session(process)
            raise
        seconds = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Measured(code, seconds, cpu, stdout, stderr)


def _kill_session(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


@dataclass(frozen=True)
class MountOptions:
    """What `tipfs mount` is given for one cold run."""

    disk_model: str  # a --disk-model spec; "" for none (real timing)
    cache_size: str = "12M"
    hints: str = "on"
    data_cache: str = "direct"

    def argv(self) -> list:
        args = ["--cache-size", self.cache_size, "--hints", self.hints,
                "--data-cache", self.data_cache]
        if self.disk_model:
            args += ["--disk-model", self.disk_model]
        return args


class Volume:
    """A tipfs volume of N backing directories under a scratch directory, and its mount point."""

    def __init__(self, tools: Tools, root: Path, disks: int):
        self.tools = tools
        self.root = root
        self.disks = [root / f"disk{i}" for i in range(disks)]
        self.mountpoint = root / "mnt"
        for d in self.disks + [self.mountpoint]:
            d.mkdir(parents=True, exist_ok=True)
        run_checked([tools.tipfs, "mkfs", *self.disks], f"tipfs mkfs of {disks} disks in {root}")

    def mount(self, options: MountOptions) -> None:
        self.unmount()
        log = self.root / "daemon.log"
        run_checked([self.tools.tipfs, "mount", *options.argv(), "--log", log,
                     self.disks[0], self.mountpoint], f"tipfs mount {' '.join(options.argv())}")

    def cold_mount(self, options: MountOptions) -> None:
        """A fresh daemon (empty block cache) on an empty page cache."""
        self.unmount()
        drop_page_cache()
        self.mount(options)

    def unmount(self) -> None:
        """Unmounts; a mount still busy (a process killed a moment ago may hold a file open
        until it is reaped) is tried again for a few seconds before giving up."""
        for attempt in range(10):
            if not is_mounted(self.mountpoint):
                return
            try:
                run_checked([self.tools.tipfs, "umount", self.mountpoint],
                            f"tipfs umount {self.mountpoint}", timeout=300)
                return
            except HarnessError:
                if attempt == 9:
                    raise
                time.sleep(1)

    def daemon_cpu_seconds(self) -> Optional[float]:
        """User + system seconds the mounted daemon has used (all threads), from
        /proc/PID/stat fields 14-15, PID from <disk0>/tipfs.pid; None if it cannot be read."""
        try:
            pid = int((self.disks[0] / "tipfs.pid").read_text().split()[0])
            with open(f"/proc/{pid}/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 2)
        except (OSError, ValueError, IndexError):
            return None

    def force_unmount(self) -> None:
        """Last resort on the way out: the clean unmount, else a lazy one."""
        try:
            self.unmount()
        except HarnessError:
            subprocess.run(["umount", "-l", str(self.mountpoint)], check=False,
                           capture_output=True)


class VolumeSet:
    """The volumes of one harness run, one per disk count, made on first use."""

    def __init__(self, tools: Tools, scratch: Path, fill):
        self.tools = tools
        self.scratch = scratch
        self.fill = fill  # fill(volume): copies the data sets in (called once per volume)
        self.volumes: dict = {}

    def get(self, disks: int) -> Volume:
        volume = self.volumes.get(disks)
        if volume is None:
            volume = Volume(self.tools, self.scratch / f"vol{disks}", disks)
            self.volumes[disks] = volume
            self.fill(volume)
        return volume

    def unmount_all(self) -> None:
        for volume in self.volumes.values():
            volume.unmount()

    def close(self, remove: bool) -> None:
        for volume in self.volumes.values():
            volume.force_unmount()
        if remove:
            for volume in self.volumes.values():
                if not is_mounted(volume.mountpoint):
                    shutil.rmtree(volume.root, ignore_errors=True)


def describe_build(build: Path) -> str:
    """Which source the measured programs were built from: the build's source directory (from
    its CMakeCache.txt) and its commit: `git describe` of a work tree (noting uncommitted
    changes, which may be other people's work in progress), or the TIPFS_SOURCE_COMMIT file of
    an exported snapshot (see bench/README.md)."""
    source = None
    try:
        for line in (build / "CMakeCache.txt").read_text(encoding="utf-8").splitlines():
            if line.startswith("CMAKE_HOME_DIRECTORY:INTERNAL="):
                source = Path(line.split("=", 1)[1])
    except OSError:
        return f"built in {build} (no CMakeCache.txt)"
    if source is None:
        return f"built in {build}"
    stamp = source / "TIPFS_SOURCE_COMMIT"
    if stamp.exists():
        return f"{stamp.read_text(encoding='utf-8').strip()}, source {source}"
    head = subprocess.run(["git", "-C", str(source), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=False)
    if head.returncode != 0:
        return f"source {source} (not a git work tree)"
    dirty = subprocess.run(["git", "-C", str(source), "status", "--porcelain",
                            "--untracked-files=no"],
                           capture_output=True, text=True, check=False).stdout.strip()
    return (head.stdout.strip() + (" with uncommitted changes in the work tree" if dirty else "")
            + f", source {source}")
