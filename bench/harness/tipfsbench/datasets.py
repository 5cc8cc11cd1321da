"""The data sets: generated once per scale and seed by tipfs-bench-gen into a cache directory
outside any volume (the generator's stamps make a second generation free), then copied into each
volume once, while it is mounted without a disk model (so the copy runs at full speed).

Layout of a data directory (and of every volume's root after the copy):
  text/        agrep, GNU grep, tre-agrep     objects/   gnuld (TOBJ)
  volume.tvol  xdataslice                     samples/   loader
  csrc/obj/    GNU ld, gcc (C objects compiled once by the generator, outside the mount)
  json/        the json.load() loader (bench/workloads/json_loader.py)
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .system import REPO, HarnessError, Tools, Volume, MountOptions, run_checked

# Debian's interpreter, whatever `python3` on PATH is (docs/python.md).
JSON_PYTHON = "/usr/bin/python3"
JSON_LOADER = REPO / "bench" / "workloads" / "json_loader.py"


@dataclass(frozen=True)
class Scale:
    """Generator parameters of one data-set size. `default` is the workloads' defaults (the
    paper's sizes for agrep and gnuld; xdataslice at 256^3); `paper` adds the 512^3 volume;
    `tiny` is for --quick and the tests."""

    name: str
    agrep: tuple = ()
    gnuld: tuple = ()
    xdataslice: tuple = ()
    loader: tuple = ()
    csrc: tuple = ()
    json: tuple = ()
    # Work per run at fraction 1 (a sweep at fraction f does f of it; see workloads.py).
    agrep_files: int = 1349
    gnuld_objects: int = 562
    xdataslice_slices: int = 32
    loader_samples: int = 4096
    loader_epochs: int = 2
    description: dict = field(default_factory=dict)


# 320 C units of 12-35 KB (median about 20 KB, -g -O1): the many small objects of a real link.
SMALL_OBJECTS = ("--files", "320", "--functions", "16", "--table-words", "1024")
SMALL_OBJECTS_TEXT = "320 C units, median 20 KB"

SCALES = {
    "tiny": Scale(
        name="tiny",
        agrep=("--files", "48", "--total", "384K"),
        gnuld=("--objects", "16", "--total", "1M"),
        xdataslice=("--dim", "64", "--brick", "8"),
        loader=("--samples", "64", "--total", "1M", "--classes", "4"),
        csrc=("--files", "6", "--functions", "8", "--table-words", "256"),
        json=("--files", "24"),
        agrep_files=48, gnuld_objects=16, xdataslice_slices=4, loader_samples=64,
        loader_epochs=2,
        description={"agrep": "48 files, 384 KiB", "gnuld": "16 objects, 1 MiB",
                     "xdataslice": "64^3 volume (1 MiB), 4 slices",
                     "loader": "64 samples, 1 MiB, 2 epochs",
                     "csrc": "6 C units", "json": "24 files"}),
    "default": Scale(
        name="default",
        csrc=SMALL_OBJECTS,
        description={"agrep": "1,349 files, 18 MiB", "gnuld": "562 objects, 60 MiB",
                     "xdataslice": "256^3 volume (64 MiB), 8^3 bricks, 32 slices",
                     "loader": "4,096 samples, 64 MiB, 2 epochs", "csrc": SMALL_OBJECTS_TEXT,
                     "json": "600 files, 14 MB"}),
    "paper": Scale(
        name="paper",
        csrc=SMALL_OBJECTS,
        xdataslice=("--scale", "paper"),
        description={"agrep": "1,349 files, 18 MiB", "gnuld": "562 objects, 60 MiB",
                     "xdataslice": "512^3 volume (512 MiB), 8^3 bricks, 32 slices",
                     "loader": "4,096 samples, 64 MiB, 2 epochs", "csrc": SMALL_OBJECTS_TEXT,
                     "json": "600 files, 14 MB"}),
}

# Which generator kinds a workload needs, and which top-level entries of the data directory
# go into a volume for it.
KIND_ENTRIES = {
    "agrep": ["text"],
    "gnuld": ["objects"],
    "xdataslice": ["volume.tvol"],
    "loader": ["samples"],
    "csrc": ["csrc/obj"],
    "json": ["json"],
}


class DataSets:
    """The generated data of one scale and seed, under ROOT/<scale>-seed<seed>/."""

    def __init__(self, tools: Tools, root: Path, scale: Scale, seed: int, kinds: list,
                 progress):
        self.tools = tools
        self.scale = scale
        self.seed = seed
        self.kinds = sorted(set(kinds))
        self.dir = root / f"{scale.name}-seed{seed}"
        self.progress = progress
        self.pattern = ""
        self.errors = 2

    def generate(self) -> None:
        """Generates every kind not yet cached (the generator checks its stamp)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        for kind in self.kinds:
            params = getattr(self.scale, kind)
            if kind == "json":
                self._generate_json(params)
                continue
            argv = [self.tools.gen, kind, "--dir", self.dir, "--seed", str(self.seed), *params]
            if kind == "csrc":
                argv += ["--compile", "--jobs", "2"]
            self.progress(f"data: {kind} ({self.scale.description.get(kind, '')}) in {self.dir}")
            line = run_checked(argv, f"tipfs-bench-gen {kind}", timeout=3600)
            if kind == "agrep":
                match = re.search(r"pattern=(\S+)", line)
                if not match:
                    raise HarnessError(f"tipfs-bench-gen agrep printed no pattern: {line.strip()}")
                self.pattern = match.group(1)
                errors = re.search(r"errors=(\d+)", line)
                if errors:
                    self.errors = int(errors.group(1))
        with open(self.dir / "harness-data.json", "w", encoding="utf-8") as f:
            json.dump({"scale": self.scale.name, "seed": self.seed, "kinds": self.kinds,
                       "pattern": self.pattern, "errors": self.errors}, f)

    def _generate_json(self, params: tuple) -> None:
        """The json loader's records, written by the loader itself; a stamp of the arguments
        makes a second generation free, as the C++ generator's stamps do."""
        argv = [JSON_PYTHON, JSON_LOADER, "generate", self.dir, "--seed", str(self.seed), *params]
        stamp = self.dir / "json.stamp"
        text = " ".join(map(str, argv[3:]))
        if stamp.exists() and stamp.read_text(encoding="utf-8") == text:
            return
        self.progress(f"data: json ({self.scale.description.get('json', '')}) in {self.dir}")
        shutil.rmtree(self.dir / "json", ignore_errors=True)
        run_checked(argv, "json_loader.py generate", timeout=3600)
        stamp.write_text(text, encoding="utf-8")

    def entries(self) -> list:
        return [entry for kind in self.kinds for entry in KIND_ENTRIES[kind]]

    def copy_into(self, volume: Volume) -> None:
        """Copies the data sets into VOLUME at full speed (no disk model), then unmounts it."""
        self.progress(f"volume: copying the data into {len(volume.disks)} disk(s) at {volume.root}")
        volume.mount(MountOptions(disk_model="", cache_size="64M"))
        try:
            for entry in self.entries():
                source = self.dir / entry
                target = volume.mountpoint / entry
                target.parent.mkdir(parents=True, exist_ok=True)
                if source.is_dir():
                    run_checked(["cp", "-a", source, target], f"copy {entry} into the volume",
                                timeout=3600)
                else:
                    shutil.copy2(source, target)
        finally:
            volume.unmount()
