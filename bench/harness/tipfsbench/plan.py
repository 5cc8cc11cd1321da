"""What to run: the mount setups, the runs, and which runs make up each figure.

A run is (workload, variant, fraction of the work, setup); the same run needed by several figures
(Figure 3's original is Figure 4's baseline, ratio 1 of Figure 6 is the 4-disk point of the disk
sweep, ...) is measured once, as many times as the most demanding figure asks. Two identities
make more runs the same: the original program issues no hints, so the mount's --hints does not
change it; and the native variant does not touch a mount at all.
"""

from __future__ import annotations

from dataclasses import dataclass, replace, asdict
from typing import Optional

from .workloads import WORKLOADS

FIGURES = ["fig3", "fig4", "fig6", "disks", "gap"]
FIGURE_TITLES = {
    "fig3": "Figure 3: run time per workload and variant",
    "fig4": "Figure 4: overhead of speculation with hints ignored",
    "fig6": "Figure 6: processor/disk speed ratio sweep (times scaled back by the ratio)",
    "disks": "Disk-count sweep (Table 8)",
    "gap": "Gap (G) sensitivity",
    "breakdown": "Per-subsystem time breakdown (Figure 3's runs)",
}


# Media rates of the profiles (man/disk-models.md), for the x value of the profile's own G.
PROFILE_RATE_MB_S = {"hp-c2247": 3.5, "hdd": 180.0, "ssd": 560.0, "nvme": 3000.0, "none": 0.0}
_RATE_UNITS = {"B/s": 1e-6, "kB/s": 1e-3, "KB/s": 1e-3, "MB/s": 1.0, "GB/s": 1e3,
               "KiB/s": 1024 / 1e6, "MiB/s": 1048576 / 1e6, "GiB/s": 1073741824 / 1e6}
_TIME_NS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}


def profile_gap_ns(profile: str) -> Optional[float]:
    """G in ns per byte of a --disk-model spec without a sweep knob: its bw= or G= key, else the
    profile's media rate; None where there is no transfer cost (`none`)."""
    items = profile.split(",")
    for item in items[1:]:
        key, _, value = item.partition("=")
        if key == "bw":
            for unit, scale in sorted(_RATE_UNITS.items(), key=lambda u: -len(u[0])):
                if value.endswith(unit):
                    return 1e3 / (float(value[: -len(unit)]) * scale)
        if key == "G":
            value = value.removesuffix("/B")
            if value == "0":
                return 0.0
            for unit, scale in sorted(_TIME_NS.items(), key=lambda u: -len(u[0])):
                if value.endswith(unit):
                    return float(value[: -len(unit)]) * scale
    rate = PROFILE_RATE_MB_S.get(items[0])
    return 1e3 / rate if rate else None


@dataclass(frozen=True)
class Setup:
    """One mount configuration. profile is the --disk-model base spec (e.g. "hp-c2247" or
    "hp-c2247,queue=fifo"); slowdown and gap_ns are appended as knobs."""

    disks: int
    profile: str
    cache: str
    data_cache: str
    hints: str = "on"
    slowdown: float = 1.0
    gap_ns: Optional[float] = None  # None: the profile's own G

    def disk_model(self) -> str:
        spec = self.profile
        if self.slowdown != 1:
            spec += f",slowdown={self.slowdown:g}"
        if self.gap_ns is not None:
            spec += ",G=0" if self.gap_ns == 0 else f",G={self.gap_ns:g}ns"
        return spec

    def label(self) -> str:
        return (f"{self.disks}d {self.disk_model()} cache={self.cache} {self.data_cache}"
                f" hints={self.hints}")


@dataclass(frozen=True)
class Run:
    workload: str
    variant: str
    fraction: float
    setup: Optional[Setup]  # None for native

    @staticmethod
    def make(workload: str, variant: str, fraction: float, setup: Setup) -> "Run":
        if variant == "native":
            return Run(workload, variant, fraction, None)
        if variant == "original":
            setup = replace(setup, hints="on")
        return Run(workload, variant, fraction, setup)

    def key(self) -> str:
        where = "native" if self.setup is None else self.setup.label()
        return f"{self.workload}|{self.variant}|f={self.fraction:g}|{where}"

    def slowdown(self) -> float:
        return 1.0 if self.setup is None else self.setup.slowdown


@dataclass
class Member:
    """A run's place in a figure: its x value (ratio, disks, G) where the figure has one."""

    figure: str
    run: Run
    x: Optional[float] = None


@dataclass
class Options:
    workloads: list
    figures: list
    variants: list          # extra variants (speculating-wait) to add to Figure 3
    repeats: int
    sweep_repeats: int
    sweep_fraction: float
    disks: int
    profile: str
    cache: str
    data_cache: str
    ratios: list
    disk_counts: list
    gaps: list              # G values in ns/B; None stands for the profile's own
    fig4_manual: bool
    sweep_real: bool


class Plan:
    def __init__(self, options: Options):
        self.options = options
        self.members: list = []
        self.repeats: dict = {}     # key -> repeats wanted
        self.runs: dict = {}        # key -> Run
        base = Setup(options.disks, options.profile, options.cache, options.data_cache)
        synthetic = [w for w in options.workloads if not WORKLOADS[w].real]
        sweepable = options.workloads if options.sweep_real else synthetic
        if "fig3" in options.figures:
            for w in options.workloads:
                variants = WORKLOADS[w].variants() + [v for v in options.variants
                                                      if v not in WORKLOADS[w].variants()]
                for v in variants:
                    self._add("fig3", Run.make(w, v, 1.0, base), options.repeats)
        if "fig4" in options.figures:
            ignore = replace(base, hints="ignore")
            for w in options.workloads:
                variants = ["original", "speculating"]
                if options.fig4_manual and not WORKLOADS[w].real:
                    variants.append("manual")
                for v in variants:
                    self._add("fig4", Run.make(w, v, 1.0, ignore), options.repeats)
        # A second run (speculating-2nd) is swept too when asked for: issue 10's disk sweep.
        sweep_variants = ["original", "manual", "speculating"] + [
            v for v in options.variants if v == "speculating-2nd"]
        f = options.sweep_fraction
        for w in sweepable:
            variants = [v for v in sweep_variants
                        if v in WORKLOADS[w].variants() + options.variants]
            if "fig6" in options.figures:
                for ratio in options.ratios:
                    for v in variants:
                        self._add("fig6", Run.make(w, v, f, replace(base, slowdown=ratio)),
                                  options.sweep_repeats, x=ratio)
            if "disks" in options.figures:
                for n in options.disk_counts:
                    for v in variants:
                        self._add("disks", Run.make(w, v, f, replace(base, disks=n)),
                                  options.sweep_repeats, x=n)
            if "gap" in options.figures:
                for g in options.gaps:
                    for v in variants:
                        self._add("gap", Run.make(w, v, f, replace(base, gap_ns=g)),
                                  options.sweep_repeats,
                                  x=profile_gap_ns(options.profile) if g is None else g)

    def _add(self, figure: str, run: Run, repeats: int, x: Optional[float] = None) -> None:
        key = run.key()
        self.runs[key] = run
        self.repeats[key] = max(self.repeats.get(key, 0), repeats)
        self.members.append(Member(figure, run, x))

    def schedule(self, done: set) -> list:
        """(run, repeat) pairs in the order to measure them: figure by figure (so an interrupted
        set still has whole figures), repeat by repeat within a figure, and within a repeat the
        variants of a workload rotated so no variant always runs first after a volume change.
        DONE holds (key, repeat) pairs measured already (a resumed set)."""
        order = []
        seen = set(done)
        for figure in FIGURES:
            members = [m for m in self.members if m.figure == figure]
            if not members:
                continue
            groups: dict = {}
            for m in members:
                groups.setdefault((m.run.workload, m.x), []).append(m.run)
            rounds = max(self.repeats[m.run.key()] for m in members)
            for r in range(rounds):
                for runs in groups.values():
                    k = r % len(runs)
                    for run in runs[k:] + runs[:k]:
                        item = (run.key(), r)
                        if r < self.repeats[run.key()] and item not in seen:
                            seen.add(item)
                            order.append((run, r))
        return order

    def to_json(self) -> dict:
        def run_json(run: Run) -> dict:
            d = asdict(run)
            d["key"] = run.key()
            return d
        return {
            "options": asdict(self.options),
            "members": [{"figure": m.figure, "x": m.x, "key": m.run.key()} for m in self.members],
            "runs": {k: run_json(r) for k, r in self.runs.items()},
            "repeats": self.repeats,
        }
