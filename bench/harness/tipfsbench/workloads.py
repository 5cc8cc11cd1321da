"""The workloads the harness runs, how each variant of each is invoked, and what of its output
must agree across variants.

Variants (see bench/workloads/README.md):
  native            the original program on the plain data directory: no tipfs, no emulated
                    disks, the machine's real timing (a CPU-bound reference, not a comparison at
                    equal disks)
  original          the program as written, on the mount (issues no hints)
  manual            the program's hint-calling variant (synthetic workloads only)
  speculating       the original under `tipfs run --mount M` (libtipspec preloaded)
  speculating-wait  the same with `--wait-for-data on` (the child waits for what it hinted)
  speculating-2nd   `tipfs run`'s second run of the same command: what the first run learned
                    (read sites, the recorded reads) is kept, as a user's next run would find it
Every speculating variant has a state directory (TIPSPEC_STATE_DIR) of its own, made empty for
`speculating` and `speculating-wait` (a first run) and filled by an untimed run before each
`speculating-2nd` run.

Every program runs with the data directory or the mount root as its working directory and
relative paths, so its output names the same files wherever it runs.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from .datasets import JSON_LOADER, JSON_PYTHON, DataSets
from .system import Tools

SYNTHETIC_VARIANTS = ["native", "original", "manual", "speculating"]
REAL_VARIANTS = ["native", "original", "speculating"]
EXTRA_VARIANTS = ["speculating-wait", "speculating-2nd"]
ALL_VARIANTS = SYNTHETIC_VARIANTS + EXTRA_VARIANTS


@dataclass(frozen=True)
class PaperNumbers:
    """Chang & Gibson, OSDI 1999, Table 7 and the hint coverage (seeds/README.md), and the goals
    of issue 6 for the speculating/original ratio."""

    description: str
    original_s: float
    speculating_s: float
    manual_s: float
    coverage_percent: float
    goal_speculating_ratio: float
    coverage_note: str = ""


PAPER = {
    "agrep": PaperNumbers("Agrep (1,349 files, 18.1 MB)", 21.4, 6.5, 6.2, 99.6, 0.28),
    "gnuld": PaperNumbers("Gnuld (562 object files, 60.2 MB read)", 89.5, 63.3, 30.2, 67.5, 0.60,
                          "plus 37 MB hinted wrongly"),
    "xdataslice": PaperNumbers("XDataSlice (3-D volume slices, 370.7 MB read)", 324.6, 97.0, 94.1,
                               97.5, 0.28),
}
OVERHEAD_GOAL = 1.02       # Figure 4: speculating with hints ignored / original
FIGURE6_GOAL = 0.05        # speculating within 5 % of manual at every ratio (agrep, xdataslice)
FIGURE6_GOAL_WORKLOADS = ("agrep", "xdataslice")


@dataclass
class Invocation:
    """How to run one variant: argv (before any `tipfs run` prefix), extra files to remove
    afterwards, and how to reduce stdout (and those files) to the bytes compared across variants."""

    argv: list
    outputs: list          # files the program writes outside the mount (removed after the run)
    accept_codes: tuple = (0,)
    canonical: Optional[Callable[[bytes, list], bytes]] = None


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str               # the generator kind whose data it reads
    real: bool              # a real program (GNU grep, tre-agrep, GNU ld): no manual variant
    title: str
    build: Callable         # build(tools, data, variant_program, fraction, scratch) -> Invocation

    def variants(self) -> list:
        return REAL_VARIANTS if self.real else SYNTHETIC_VARIANTS


def _count(total: int, fraction: float) -> int:
    return max(1, int(round(total * fraction)))


def _sorted_files(root: Path, sub: str, suffix: str) -> list:
    """Relative paths of the files under ROOT/SUB ending in SUFFIX, in sorted (shell glob)
    order."""
    base = root / sub
    return sorted(str(p.relative_to(root)) for p in base.rglob(f"*{suffix}") if p.is_file())


def _agrep(tools: Tools, data: DataSets, program: str, fraction: float, scratch: Path):
    argv = [tools.agrep, "--variant", program, "-p", data.pattern, "-k", str(data.errors)]
    if fraction < 1:
        argv += ["--files", str(_count(data.scale.agrep_files, fraction))]
    return Invocation(argv + ["text"], [])


def _gnuld(tools: Tools, data: DataSets, program: str, fraction: float, scratch: Path):
    image = scratch / "gnuld-image.texe"
    argv = [tools.gnuld, "--variant", program, "-o", image]
    if fraction < 1:
        argv += ["--objects", str(_count(data.scale.gnuld_objects, fraction)), "--allow-undefined"]
    # stdout already carries the image's size and digest.
    return Invocation(argv + ["objects"], [image])


def _xdataslice(tools: Tools, data: DataSets, program: str, fraction: float, scratch: Path):
    slices = _count(data.scale.xdataslice_slices, fraction)
    return Invocation([tools.xdataslice, "--variant", program, "--slices", str(slices),
                       "volume.tvol"], [])


def _loader(tools: Tools, data: DataSets, program: str, fraction: float, scratch: Path):
    argv = [tools.loader, "--variant", program, "--epochs", str(data.scale.loader_epochs)]
    if fraction < 1:
        argv += ["--samples", str(_count(data.scale.loader_samples, fraction))]
    return Invocation(argv + ["samples"], [])


def _sorted_lines(stdout: bytes, _files: list) -> bytes:
    # grep -r walks directories in readdir order, which is the file system's business (hashed on
    # ext4, by name on tipfs): the set of matching lines is what must agree.
    return b"\n".join(sorted(stdout.splitlines())) + b"\n"


def _grep(tools: Tools, data: DataSets, program: str, fraction: float, scratch: Path):
    # -r over the whole tree whatever the fraction (a file subset would no longer be grep -r).
    return Invocation(["grep", "-r", "-F", "-n", data.pattern, "text"], [], accept_codes=(0, 1),
                      canonical=_sorted_lines)


def _tre_agrep(tools: Tools, data: DataSets, program: str, fraction: float, scratch: Path):
    files = _sorted_files(data.dir, "text", ".txt")
    if fraction < 1:
        files = files[:_count(len(files), fraction)]
    # -k: the pattern is a literal string; -E: at most E edits, as tipfs-bench-agrep -k E.
    return Invocation(["tre-agrep", f"-{data.errors}", "-k", data.pattern, *files], [],
                      accept_codes=(0, 1))


def _sha256sum(tools: Tools, data: DataSets, program: str, fraction: float, scratch: Path):
    # Reads each file whole and looks at no byte's meaning: the case speculation serves fully.
    files = _sorted_files(data.dir, "text", ".txt")
    if fraction < 1:
        files = files[:_count(len(files), fraction)]
    return Invocation(["sha256sum", *files], [])


def _tar(tools: Tools, data: DataSets, program: str, fraction: float, scratch: Path):
    # An archive of the tree, written outside the mount. Names sorted and owners and times fixed,
    # so the archive's bytes depend only on the files' names, modes and contents, wherever they
    # are read from.
    out = scratch / "tar-out.tar"
    return Invocation(["tar", "-cf", out, "--sort=name", "--mtime=@0", "--owner=0", "--group=0",
                       "--numeric-owner", "text"], [out], canonical=_with_file_digest)


def _with_file_digest(stdout: bytes, files: list) -> bytes:
    digest = hashlib.sha256()
    for path in files:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    return stdout + f"output sha256 {digest.hexdigest()}\n".encode()


def _ld(tools: Tools, data: DataSets, program: str, fraction: float, scratch: Path):
    objects = _sorted_files(data.dir, "csrc/obj", ".o")
    if fraction < 1:
        objects = objects[:_count(len(objects), fraction)]
    out = scratch / "ld-out.o"
    # A relocatable link reads every input whole (sections, symbols, relocations, debug info)
    # and is deterministic, so its output's digest is compared across variants.
    return Invocation(["ld", "-r", "-o", out, *objects], [out], canonical=_with_file_digest)


def _gcc(tools: Tools, data: DataSets, program: str, fraction: float, scratch: Path):
    objects = _sorted_files(data.dir, "csrc/obj", ".o")
    if fraction < 1:  # main.o stays: the program must link
        units = [o for o in objects if not o.endswith("/main.o")]
        objects = units[:_count(len(units), fraction)] + [o for o in objects
                                                          if o.endswith("/main.o")]
    out = scratch / "gcc-out"
    # A full link through the driver: gcc runs collect2, which runs ld, so the reads happen in
    # a grandchild of the program `tipfs run` started.
    flags = [] if fraction == 1 else ["-Wl,--unresolved-symbols=ignore-all"]
    return Invocation(["gcc", *flags, "-o", out, *objects], [out], canonical=_with_file_digest)


def _json(tools: Tools, data: DataSets, program: str, fraction: float, scratch: Path):
    # Debian's interpreter, whatever python3 is on PATH; the loader checks every record's digest.
    argv = [JSON_PYTHON, JSON_LOADER, "load", "."]
    if fraction < 1:
        argv += ["--limit", str(_count(len(_sorted_files(data.dir, "json", ".json")), fraction))]
    return Invocation(argv, [])


WORKLOADS = {
    w.name: w for w in [
        Workload("agrep", "agrep", False, "agrep (tipfs-bench-agrep)", _agrep),
        Workload("gnuld", "gnuld", False, "gnuld (tipfs-bench-gnuld)", _gnuld),
        Workload("xdataslice", "xdataslice", False, "xdataslice (tipfs-bench-xdataslice)",
                 _xdataslice),
        Workload("loader", "loader", False, "loader (tipfs-bench-loader)", _loader),
        Workload("grep", "agrep", True, "GNU grep -r -F", _grep),
        Workload("tre-agrep", "agrep", True, "tre-agrep -k", _tre_agrep),
        Workload("sha256sum", "agrep", True, "sha256sum of every file", _sha256sum),
        Workload("tar", "agrep", True, "tar -cf of the tree", _tar),
        Workload("ld", "csrc", True, "GNU ld -r", _ld),
        Workload("gcc", "csrc", True, "gcc (collect2, ld) full link", _gcc),
        Workload("json", "json", True, "Python json.load() of shuffled files", _json),
    ]
}
SYNTHETIC = [w for w in WORKLOADS if not WORKLOADS[w].real]
REAL = [w for w in WORKLOADS if WORKLOADS[w].real]


def program_variant(variant: str) -> str:
    """The --variant a program is given: only `manual` calls the hint API."""
    return "manual" if variant == "manual" else "original"


def canonical_output(invocation: Invocation, stdout: bytes) -> bytes:
    if invocation.canonical is None:
        return stdout
    return invocation.canonical(stdout, invocation.outputs)


_REPORT_FIELD = re.compile(r"(\w+)=(\S+)")


def program_report(stderr_text: str) -> dict:
    """The key=value fields of the workload's stderr report line
    (`[program] variant=... elapsed=...s reads=... bytes_read=...`), or {}."""
    for line in reversed(stderr_text.splitlines()):
        if line.startswith("[") and "elapsed=" in line:
            return {k: v.rstrip("s") if k == "elapsed" else v
                    for k, v in _REPORT_FIELD.findall(line)}
    return {}
