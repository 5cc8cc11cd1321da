"""From runs.csv and plan.json to one CSV per figure and summary.md (medians with min and max of
the repeats, ratios to the original, hint coverage, output agreement, the paper's numbers beside
ours). Pure functions of those two files: `run.py --report DIR` redoes this without measuring.
"""

from __future__ import annotations

import csv
import json
import re
import statistics
from collections import Counter
from pathlib import Path
from typing import Optional

from .execute import DONE_STATUSES, read_runs
from .plan import FIGURE_TITLES
from .workloads import (FIGURE6_GOAL, FIGURE6_GOAL_WORKLOADS, OVERHEAD_GOAL, PAPER, WORKLOADS)

VARIANT_ORDER = ["native", "original", "speculating", "speculating-2nd", "speculating-wait",
                 "manual"]


def _floats(rows: list, column: str) -> list:
    out = []
    for row in rows:
        try:
            out.append(float(row[column]))
        except (KeyError, ValueError):
            pass
    return out


def _median(values: list) -> Optional[float]:
    return statistics.median(values) if values else None


def _fmt(value: Optional[float], digits: int = 2) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a / b if a is not None and b else None


class Results:
    """The measured runs of one results directory, grouped by run key."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.plan = json.loads((directory / "plan.json").read_text(encoding="utf-8"))
        self.rows = read_runs(directory / "runs.csv")
        self.by_key: dict = {}
        for row in self.rows:
            if row["status"] in DONE_STATUSES:
                self.by_key.setdefault(row["key"], []).append(row)
        self.references = self._references()

    def _references(self) -> dict:
        """(workload, fraction) -> the original's output digest (the most frequent one, should
        the original itself disagree between repeats)."""
        digests: dict = {}
        for row in self.rows:
            if row["variant"] == "original" and row["status"] in DONE_STATUSES:
                digests.setdefault((row["workload"], row["fraction"]), Counter())[
                    row["output_sha256"]] += 1
        return {k: c.most_common(1)[0][0] for k, c in digests.items()}

    def members(self, figure: str) -> list:
        return [m for m in self.plan["members"] if m["figure"] == figure]

    def run(self, key: str) -> dict:
        return self.plan["runs"][key]

    def summary(self, key: str, column: str = "elapsed_s") -> dict:
        rows = self.by_key.get(key, [])
        values = _floats(rows, column)
        return {"n": len(values), "median": _median(values),
                "min": min(values) if values else None, "max": max(values) if values else None}

    def median_of(self, key: str, column: str) -> Optional[float]:
        return _median(_floats(self.by_key.get(key, []), column))

    def agreement(self, key: str) -> str:
        """"yes" when every repeat printed what the original printed."""
        rows = self.by_key.get(key, [])
        if not rows:
            return "no runs"
        run = self.run(key)
        reference = self.references.get((run["workload"], f"{run['fraction']:g}"))
        if reference is None:
            return "no original to compare"
        differ = sum(1 for r in rows if r["output_sha256"] != reference)
        return "yes" if differ == 0 else f"NO ({differ} of {len(rows)} differ)"

    def disagreeing(self) -> list:
        """Completed runs whose output differs from their original's (decided here, over the
        whole set, not by the order in which the runs happened to be measured)."""
        out = []
        for row in self.rows:
            if row["status"] not in DONE_STATUSES:
                continue
            reference = self.references.get((row["workload"], row["fraction"]))
            if reference is not None and row["output_sha256"] != reference:
                out.append(row)
        return out

    def failures(self) -> list:
        return [r for r in self.rows if r["status"] not in DONE_STATUSES]


def _key_of(results: Results, figure: str, workload: str, variant: str,
            x: Optional[float] = None) -> Optional[str]:
    for m in results.members(figure):
        run = results.run(m["key"])
        if run["workload"] == workload and run["variant"] == variant and (x is None or m["x"] == x):
            return m["key"]
    return None


def _workloads(results: Results, figure: str) -> list:
    seen = []
    for m in results.members(figure):
        w = results.run(m["key"])["workload"]
        if w not in seen:
            seen.append(w)
    return seen


def _variants(results: Results, figure: str, workload: str) -> list:
    present = {results.run(m["key"])["variant"] for m in results.members(figure)
               if results.run(m["key"])["workload"] == workload}
    return [v for v in VARIANT_ORDER if v in present]


def _xs(results: Results, figure: str) -> list:
    return sorted({m["x"] for m in results.members(figure) if m["x"] is not None})


def _write_csv(path: Path, header: list, rows: list) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def figure3(results: Results) -> list:
    header = ["workload", "variant", "runs", "median_s", "min_s", "max_s", "ratio_to_original",
              "coverage", "hint_calls", "program_mb_read", "fuse_mb_read", "disk_mb_read",
              "disk_utilization", "outputs_agree",
              "paper_s", "paper_ratio", "note"]
    rows = []
    for w in _workloads(results, "fig3"):
        original = results.summary(_key_of(results, "fig3", w, "original") or "")["median"]
        for v in _variants(results, "fig3", w):
            key = _key_of(results, "fig3", w, v)
            s = results.summary(key)
            paper = PAPER.get(w)
            paper_s = {"original": paper.original_s, "speculating": paper.speculating_s,
                       "manual": paper.manual_s}.get(v) if paper else None
            bytes_read = results.median_of(key, "bytes_read")
            rows.append([w, v, s["n"], _fmt(s["median"], 3), _fmt(s["min"], 3), _fmt(s["max"], 3),
                         _fmt(_ratio(s["median"], original), 3),
                         _fmt(results.median_of(key, "coverage"), 4),
                         _fmt(results.median_of(key, "hint_calls"), 0),
                         _fmt(bytes_read / 1e6 if bytes_read is not None else None, 1),
                         _fmt(results.median_of(key, "fuse_read_mb"), 1),
                         _fmt(results.median_of(key, "disk_read_mb"), 1),
                         _fmt(results.median_of(key, "disk_utilization"), 3),
                         results.agreement(key), _fmt(paper_s, 1),
                         _fmt(_ratio(paper_s, paper.original_s) if paper_s else None, 2),
                         "real timing: no tipfs, no emulated disks (CPU-bound reference)"
                         if v == "native" else ""])
    _write_csv(results.dir / "fig3.csv", header, rows)
    return rows


def figure4(results: Results) -> list:
    header = ["workload", "variant", "runs", "median_s", "min_s", "max_s", "original_median_s",
              "overhead", "goal"]
    rows = []
    for w in _workloads(results, "fig4"):
        original = results.summary(_key_of(results, "fig4", w, "original") or "")
        for v in _variants(results, "fig4", w):
            s = results.summary(_key_of(results, "fig4", w, v) or "")
            rows.append([w, v, s["n"], _fmt(s["median"], 3), _fmt(s["min"], 3), _fmt(s["max"], 3),
                         _fmt(original["median"], 3),
                         _fmt(_ratio(s["median"], original["median"]), 3),
                         "" if v == "original" else f"<= {OVERHEAD_GOAL}"])
    _write_csv(results.dir / "fig4.csv", header, rows)
    return rows


def sweep(results: Results, figure: str, x_name: str, column: str) -> list:
    """Figure 6 (x = speed ratio, times scaled back by it), the disk sweep (x = disks) and the
    gap sweep (x = G in ns/B): median, min, max per workload, variant and x, the ratio to the
    original at the same x and, for the speculating variant, its ratio to manual."""
    header = ["workload", "variant", x_name, "runs", "median_s", "min_s", "max_s", "raw_median_s",
              "ratio_to_original", "improvement_percent", "speculating_over_manual"]
    rows = []
    for w in _workloads(results, figure):
        for v in _variants(results, figure, w):
            for x in _xs(results, figure):
                key = _key_of(results, figure, w, v, x)
                if key is None:
                    continue
                s = results.summary(key, column)
                original = results.summary(_key_of(results, figure, w, "original", x) or "",
                                           column)["median"]
                manual = results.summary(_key_of(results, figure, w, "manual", x) or "",
                                         column)["median"]
                ratio = _ratio(s["median"], original)
                rows.append([w, v, f"{x:g}", s["n"], _fmt(s["median"], 3), _fmt(s["min"], 3),
                             _fmt(s["max"], 3), _fmt(results.median_of(key, "elapsed_s"), 3),
                             _fmt(ratio, 3), _fmt((1 - ratio) * 100 if ratio else None, 1),
                             _fmt(_ratio(s["median"], manual), 3)
                             if v.startswith("speculating") else ""])
    _write_csv(results.dir / f"{figure}.csv", header, rows)
    return rows


_BREAKDOWN_ENTRY = re.compile(r'"(\w+)":\{"share":([0-9.eE+-]+),"nanos":(-?\d+)\}')


def breakdown_entries(text: str) -> list:
    """(subsystem, share, nanos) of a `tipfs stats --breakdown --json` document. Read entry by
    entry rather than as one JSON value: tipfs formats the document's tail (idle, capacity,
    operations) into a 128-byte buffer, which long runs overflow, truncating the JSON after
    the idle entry (util/perf_context.cc BreakdownJson); every subsystem entry survives."""
    return [(m.group(1), float(m.group(2)), int(m.group(3)))
            for m in _BREAKDOWN_ENTRY.finditer(text)]


def breakdown(results: Results) -> list:
    """Median share of each subsystem (and idle) over Figure 3's runs of each workload and
    variant on the mount, from the saved `tipfs stats --breakdown --json`."""
    header = ["workload", "variant", "subsystem", "median_share", "median_seconds"]
    rows = []
    runs_dir = results.dir / "runs"
    for w in _workloads(results, "fig3"):
        for v in _variants(results, "fig3", w):
            if v == "native":
                continue
            key = _key_of(results, "fig3", w, v)
            shares: dict = {}
            for row in results.by_key.get(key or "", []):
                path = runs_dir / f"{int(row['run_id']):05d}-{w}-{v}.breakdown.json"
                if not path.exists():
                    continue
                for name, share, nanos in breakdown_entries(path.read_text(encoding="utf-8")):
                    shares.setdefault(name, []).append((share, nanos))
            for name, values in shares.items():
                rows.append([w, v, name, f"{statistics.median(s for s, _ in values):.5f}",
                             f"{statistics.median(n for _, n in values) / 1e9:.4f}"])
    _write_csv(results.dir / "breakdown.csv", header, rows)
    return rows


def write_all(results: Results) -> dict:
    figures = {m["figure"] for m in results.plan["members"]}
    tables = {}
    if "fig3" in figures:
        tables["fig3"] = figure3(results)
        tables["breakdown"] = breakdown(results)
    if "fig4" in figures:
        tables["fig4"] = figure4(results)
    if "fig6" in figures:
        tables["fig6"] = sweep(results, "fig6", "ratio", "scaled_s")
    if "disks" in figures:
        tables["disks"] = sweep(results, "disks", "disks", "elapsed_s")
    if "gap" in figures:
        tables["gap"] = sweep(results, "gap", "gap_ns_per_byte", "elapsed_s")
    return tables


def _cell(s: dict) -> str:
    if s["median"] is None:
        return "-"
    if s["n"] == 1:
        return f"{s['median']:.2f} s"
    return f"{s['median']:.2f} s ({s['min']:.2f}-{s['max']:.2f})"


def _percent(share: Optional[float]) -> str:
    return "-" if share is None else f"{100 * share:.1f} %"


def _ratio_cell(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.2f}"


def measured_quietly(context: dict) -> bool:
    """Whether the load average (which counts the benchmark's own program, daemon and
    speculating child, about two) stayed at or under the CPU count plus one over the set."""
    max_load, cpus = context.get("max_load"), context.get("cpus")
    return max_load is not None and bool(cpus) and max_load <= cpus + 1


def summary_markdown(results: Results, context: dict) -> str:
    """summary.md: the headline table beside Table 7 and the goals, coverage, Figure 4 and 6
    against their goals, the sweeps, the real programs, output agreement, failures."""
    o = results.plan["options"]
    lines = [f"# tipfs benchmark results ({context['started']})", ""]
    if measured_quietly(context):
        lines += [f"**Measured on a quiet machine** ({context['machine']}; load average "
                  f"{context['load']}, the benchmark's own included): ratios within this set are "
                  "the numbers to quote; absolute times hold for this machine only.", ""]
    else:
        lines += [f"**Measured on a shared, loaded machine** ({context['machine']}; load average "
                  f"{context['load']}): only ratios within this set mean much; re-run the set on "
                  "a quiet machine for numbers to quote.", ""]
    lines += [f"Setup: {o['disks']} disks `{o['profile']}`, cache {o['cache']}, "
              f"`--data-cache {o['data_cache']}`, cold (page cache dropped and the daemon "
              f"remounted before every run), medians of {o['repeats']} (min-max in brackets); "
              f"sweeps: medians of {o['sweep_repeats']} at {o['sweep_fraction']:g} of the work. "
              f"Data: scale `{context['scale']}`, seed {context['seed']}. "
              f"Programs: {context['git']}.",
              ""]
    if "fig3" in o["figures"]:
        lines += ["## Figure 3 / Table 7 beside the paper", "",
                  "| workload | original | speculating | manual | spec/orig | manual/orig "
                  "| paper spec/orig | paper manual/orig | goal spec/orig | met |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for w in [w for w in _workloads(results, "fig3") if not WORKLOADS[w].real]:
            s = {v: results.summary(_key_of(results, "fig3", w, v) or "")
                 for v in ("original", "speculating", "manual")}
            spec = _ratio(s["speculating"]["median"], s["original"]["median"])
            man = _ratio(s["manual"]["median"], s["original"]["median"])
            paper = PAPER.get(w)
            met = "-"
            if paper and spec is not None:
                met = "yes" if spec <= paper.goal_speculating_ratio else "no"
            lines.append(
                f"| {w} | {_cell(s['original'])} | {_cell(s['speculating'])} | {_cell(s['manual'])}"
                f" | {_ratio_cell(spec)} | {_ratio_cell(man)}"
                f" | {_ratio_cell(paper.speculating_s / paper.original_s) if paper else '-'}"
                f" | {_ratio_cell(paper.manual_s / paper.original_s) if paper else '-'}"
                f" | {'<= %.2f' % paper.goal_speculating_ratio if paper else '-'} | {met} |")
        lines += ["", "Paper (Chang & Gibson, OSDI 1999, Table 7; 4 disks of 15 ms, 12 MB cache, "
                  "mean of 5): " + "; ".join(f"{p.description}: {p.original_s} s, speculating "
                                              f"{p.speculating_s} s, manual {p.manual_s} s"
                                              for p in PAPER.values()) + ".", ""]
        lines += ["### Hint coverage (hinted blocks read / blocks read)", "",
                  "| workload | manual | speculating | paper | speculative hints MB | "
                  "speculative accuracy | forks | restarts (mismatch/behind) |",
                  "|---|---|---|---|---|---|---|---|"]
        for w in [w for w in _workloads(results, "fig3") if not WORKLOADS[w].real]:
            mk = _key_of(results, "fig3", w, "manual") or ""
            sk = _key_of(results, "fig3", w, "speculating") or ""
            paper = PAPER.get(w)
            paper_coverage = "-"
            if paper:
                paper_coverage = f"{paper.coverage_percent} %"
                if paper.coverage_note:
                    paper_coverage += f" ({paper.coverage_note})"
            lines.append(
                f"| {w} | {_percent(results.median_of(mk, 'coverage'))}"
                f" | {_percent(results.median_of(sk, 'coverage'))} | {paper_coverage}"
                f" | {_fmt(results.median_of(sk, 'speculative_hinted_mb'), 1) or '-'}"
                f" | {_fmt(results.median_of(sk, 'speculative_accuracy'), 3) or '-'}"
                f" | {_fmt(results.median_of(sk, 'spec_forks'), 0) or '-'}"
                f" | {_fmt(results.median_of(sk, 'spec_restarts'), 0) or '-'} ("
                f"{_fmt(results.median_of(sk, 'spec_offtrack_mismatch'), 0) or '-'}/"
                f"{_fmt(results.median_of(sk, 'spec_offtrack_behind'), 0) or '-'}) |")
        lines += _first_and_second_run(results)
        lines += ["", "### Every workload and variant, with the native baseline", "",
                  "The native variant is the original program on the plain data directory: **real "
                  "timing, no tipfs and no emulated disks**, so it is a CPU-bound reference (what "
                  "the program costs without waiting for 15 ms disks), not a comparison at equal "
                  "disks.", "",
                  "| workload | variant | time | ratio to original | coverage | outputs agree |",
                  "|---|---|---|---|---|---|"]
        for w in _workloads(results, "fig3"):
            original = results.summary(_key_of(results, "fig3", w, "original") or "")["median"]
            for v in _variants(results, "fig3", w):
                k = _key_of(results, "fig3", w, v) or ""
                s = results.summary(k)
                c = results.median_of(k, "coverage")
                lines.append(f"| {w} | {v}{' (real timing)' if v == 'native' else ''} | {_cell(s)}"
                             f" | {_ratio_cell(_ratio(s['median'], original))}"
                             f" | {'-' if c is None else f'{100 * c:.1f} %'}"
                             f" | {results.agreement(k)} |")
        lines.append("")
    if "fig4" in o["figures"]:
        lines += ["## Figure 4: overhead with hints ignored (`--hints ignore`)", "",
                  f"Goal: speculating / original <= {OVERHEAD_GOAL} (paper: 1-4 % slower).", "",
                  "| workload | original | speculating, hints ignored | overhead | met |",
                  "|---|---|---|---|---|"]
        for w in _workloads(results, "fig4"):
            orig = results.summary(_key_of(results, "fig4", w, "original") or "")
            for v in [v for v in _variants(results, "fig4", w) if v != "original"]:
                s = results.summary(_key_of(results, "fig4", w, v) or "")
                r = _ratio(s["median"], orig["median"])
                met = "-" if r is None else ("yes" if r <= OVERHEAD_GOAL else "no")
                lines.append(
                    f"| {w} | {_cell(orig)} | {v}: {_cell(s)} | {_ratio_cell(r)} | {met} |")
        lines.append("")
    if "fig6" in o["figures"]:
        lines += _sweep_section(results, "fig6", "ratio", "scaled_s",
                                "Times are divided by the ratio (seed 000: the paper doubled the "
                                "time before each I/O completion was signalled, then scaled its "
                                "measurements by half). Goal: speculating within "
                                f"{FIGURE6_GOAL:.0%} of manual for "
                                f"{' and '.join(FIGURE6_GOAL_WORKLOADS)} at every ratio.")
    if "fig6" in o["figures"]:
        lines += _figure6_goal(results)
    if "disks" in o["figures"]:
        lines += _sweep_section(results, "disks", "disks", "elapsed_s",
                                "The same data on "
                                f"{', '.join(str(n) for n in o['disk_counts'])} disks "
                                "(the paper's Table 8 used 1, 2, 4 and 10).")
    if "gap" in o["figures"]:
        lines += _sweep_section(results, "gap", "G ns/B", "elapsed_s",
                                "G = per-byte Gap of every disk (1000/G MB/s); the profile's "
                                "own is marked by its value.")
    failures = results.failures()
    lines += ["## Output agreement and failures", ""]
    mismatched = results.disagreeing()
    lines.append(f"{len(results.rows)} runs: {len(mismatched)} printed something other than the "
                 f"original, {len(failures)} failed or timed out.")
    for r in mismatched + failures:
        what = "output differs" if r["status"] in DONE_STATUSES else r["status"]
        lines.append(f"- run {r['run_id']} {r['key']}: {what} (exit {r['exit_code'] or '-'})")
    lines += ["", "## Files", "",
              "runs.csv (every run, its counters and load average), fig3.csv, fig4.csv, fig6.csv, "
              "disks.csv, gap.csv, breakdown.csv and a PNG for each; runs/ holds each run's "
              "stderr, `tipfs stats --json`, `tipfs stats --breakdown --json` and libtipspec "
              "counters; outputs/ each distinct output once; plan.json and config.json what was "
              "asked.", ""]
    return "\n".join(lines)


def _first_and_second_run(results: Results) -> list:
    """Issue 10's table: speculation on a first run (nothing learned) and on the second run of the
    same command (learned read sites and the recorded reads kept), with the unused hinted bytes
    per byte read and the disk reads in flight."""
    workloads = [w for w in _workloads(results, "fig3")
                 if "speculating-2nd" in _variants(results, "fig3", w)]
    if not workloads:
        return []
    lines = ["", "### Speculation, first and second run", "",
             "| workload | original | first run | /orig | second run | /orig | unused hinted / "
             "read (1st, 2nd) | history blocks used (2nd) | reads in flight (orig, 1st, 2nd) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for w in workloads:
        keys = {v: _key_of(results, "fig3", w, v) or ""
                for v in ("original", "speculating", "speculating-2nd")}
        s = {v: results.summary(k) for v, k in keys.items()}
        original = s["original"]["median"]

        def med(variant: str, column: str, digits: int = 2) -> str:
            return _fmt(results.median_of(keys[variant], column), digits) or "-"

        def unused_per_read(variant: str) -> str:
            read = results.median_of(keys["original"], "fuse_read_mb")
            return _fmt(_ratio(results.median_of(keys[variant], "hinted_unused_mb"), read)) or "-"
        lines.append(
            f"| {w} | {_cell(s['original'])} | {_cell(s['speculating'])}"
            f" | {_ratio_cell(_ratio(s['speculating']['median'], original))}"
            f" | {_cell(s['speculating-2nd'])}"
            f" | {_ratio_cell(_ratio(s['speculating-2nd']['median'], original))}"
            f" | {unused_per_read('speculating')}, {unused_per_read('speculating-2nd')}"
            f" | {med('speculating-2nd', 'history_consumed', 0)}"
            f" | {med('original', 'reads_in_flight')}, {med('speculating', 'reads_in_flight')},"
            f" {med('speculating-2nd', 'reads_in_flight')} |")
    return lines


def _figure6_goal(results: Results) -> list:
    """The worst speculating/manual ratio over the ratios, per workload, against the goal."""
    lines = ["| workload | speculating / manual at each ratio | worst | goal | met |",
             "|---|---|---|---|---|"]
    for w in _workloads(results, "fig6"):
        pairs = []
        for x in _xs(results, "fig6"):
            spec = results.summary(_key_of(results, "fig6", w, "speculating", x) or "",
                                   "scaled_s")["median"]
            manual = results.summary(_key_of(results, "fig6", w, "manual", x) or "",
                                     "scaled_s")["median"]
            if spec is not None and manual:
                pairs.append((x, spec / manual))
        if not pairs:
            continue
        worst = max(r for _, r in pairs)
        goal = w in FIGURE6_GOAL_WORKLOADS
        met = ("yes" if worst <= 1 + FIGURE6_GOAL else "no") if goal else "-"
        lines.append(f"| {w} | " + ", ".join(f"{x:g}: {r:.2f}" for x, r in pairs)
                     + f" | {worst:.2f} | {'<= %.2f' % (1 + FIGURE6_GOAL) if goal else '-'}"
                     f" | {met} |")
    return lines + [""]


def _sweep_section(results: Results, figure: str, x_label: str, column: str, note: str) -> list:
    xs = _xs(results, figure)
    lines = [f"## {FIGURE_TITLES[figure]}", "", note, "",
             "| workload | variant | " + " | ".join(f"{x_label} {x:g}" for x in xs) + " |",
             "|---|---|" + "---|" * len(xs)]
    for w in _workloads(results, figure):
        for v in _variants(results, figure, w):
            cells = []
            for x in xs:
                key = _key_of(results, figure, w, v, x)
                s = results.summary(key or "", column)
                orig = results.summary(_key_of(results, figure, w, "original", x) or "",
                                       column)["median"]
                text = "-" if s["median"] is None else f"{s['median']:.2f} s"
                if v != "original" and s["median"] is not None and orig:
                    text += f" ({s['median'] / orig:.2f})"
                if v.startswith("speculating"):
                    manual = results.summary(_key_of(results, figure, w, "manual", x) or "",
                                             column)["median"]
                    if manual and s["median"] is not None:
                        text += f" [{s['median'] / manual:.2f} of manual]"
                cells.append(text)
            lines.append(f"| {w} | {v} | " + " | ".join(cells) + " |")
    lines += ["", "(ratio to the original at the same point in brackets)", ""]
    return lines
