#!/usr/bin/env python3
"""Unit tests of the benchmark harness's logic (bench/harness/tipfsbench), no mount needed: the
plan (which runs are shared between figures, the schedule, resuming), the counters taken from a
mount's stats (hint coverage in blocks) and from libtipspec, and the report (medians, min/max,
ratios, Figure 6's scaling by the ratio, output agreement) on a results directory written here.
"""

import csv
import json
import sys
import tempfile
import unittest
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "harness"))
sys.dont_write_bytecode = True

from tipfsbench import report  # noqa: E402
from tipfsbench.execute import COLUMNS, stats_row, tipspec_row  # noqa: E402
from tipfsbench.plan import Options, Plan, Run, Setup, profile_gap_ns  # noqa: E402


def options(**changes) -> Options:
    base = Options(workloads=["agrep", "grep"], figures=["fig3", "fig4", "fig6", "disks", "gap"],
                   variants=[], repeats=3, sweep_repeats=2, sweep_fraction=1.0, disks=4,
                   profile="hp-c2247", cache="12M", data_cache="direct", ratios=[1, 2],
                   disk_counts=[1, 4], gaps=[0, None], fig4_manual=False, sweep_real=False)
    return replace(base, **changes)


class PlanTest(unittest.TestCase):
    def test_runs_shared_between_figures_are_measured_once(self):
        plan = Plan(options())
        keys = list(plan.runs)
        self.assertEqual(len(keys), len(set(keys)))
        base = Setup(4, "hp-c2247", "12M", "direct")
        # The original issues no hints: Figure 4's original (hints ignored) is Figure 3's.
        fig3_original = Run.make("agrep", "original", 1.0, base).key()
        fig4_original = Run.make("agrep", "original", 1.0, replace(base, hints="ignore")).key()
        self.assertEqual(fig3_original, fig4_original)
        # Speculating with hints ignored is a different run.
        self.assertNotEqual(Run.make("agrep", "speculating", 1.0, base).key(),
                            Run.make("agrep", "speculating", 1.0,
                                     replace(base, hints="ignore")).key())
        # Ratio 1 of Figure 6, 4 disks of the sweep and the profile's G are Figure 3's setup.
        figures = {m.figure for m in plan.members if m.run.key() == fig3_original}
        self.assertEqual(figures, {"fig3", "fig4", "fig6", "disks", "gap"})
        # Shared runs take the most repeats any figure asks for.
        self.assertEqual(plan.repeats[fig3_original], 3)
        g0 = Run.make("agrep", "manual", 1.0, replace(base, gap_ns=0)).key()
        self.assertEqual(plan.repeats[g0], 2)

    def test_native_and_real_programs(self):
        plan = Plan(options())
        native = [r for r in plan.runs.values() if r.variant == "native"]
        self.assertEqual(sorted(r.workload for r in native), ["agrep", "grep"])
        self.assertTrue(all(r.setup is None for r in native))
        # Real programs have no manual variant and stay out of the sweeps unless asked.
        self.assertFalse(any(r.workload == "grep" and r.variant == "manual"
                             for r in plan.runs.values()))
        # They are in Figure 4 (the overhead of speculation is asked of every program).
        self.assertEqual({m.figure for m in plan.members if m.run.workload == "grep"},
                         {"fig3", "fig4"})
        swept = Plan(options(sweep_real=True))
        self.assertIn("fig6", {m.figure for m in swept.members if m.run.workload == "grep"})

    def test_second_run_is_measured_and_swept_only_when_asked(self):
        plain = Plan(options())
        self.assertFalse(any(r.variant == "speculating-2nd" for r in plain.runs.values()))
        plan = Plan(options(variants=["speculating-2nd"], workloads=["agrep", "json"],
                            sweep_real=True))
        second = {(m.figure, m.run.workload) for m in plan.members
                  if m.run.variant == "speculating-2nd"}
        self.assertIn(("fig3", "json"), second)
        self.assertIn(("disks", "json"), second)
        self.assertNotIn("fig4", {figure for figure, _ in second})

    def test_disk_models_of_the_sweeps(self):
        plan = Plan(options())
        models = {m.run.setup.disk_model() for m in plan.members if m.run.setup is not None}
        self.assertEqual(models, {"hp-c2247", "hp-c2247,slowdown=2", "hp-c2247,G=0"})
        disks = {m.run.setup.disks for m in plan.members if m.figure == "disks"}
        self.assertEqual(disks, {1, 4})
        self.assertEqual(profile_gap_ns("hp-c2247"), 1e3 / 3.5)
        self.assertEqual(profile_gap_ns("hdd,bw=40MB/s"), 25.0)
        self.assertEqual(profile_gap_ns("ssd,G=2.5ns"), 2.5)
        self.assertIsNone(profile_gap_ns("none"))

    def test_schedule_covers_every_repeat_once_and_resumes(self):
        plan = Plan(options())
        order = plan.schedule(set())
        expected = sum(plan.repeats.values())
        self.assertEqual(len(order), expected)
        self.assertEqual(len({(r.key(), i) for r, i in order}), expected)
        # Variants rotate: the first variant of agrep's Figure 3 group differs between repeats.
        firsts = []
        for repeat in range(3):
            firsts.append(next(r.variant for r, i in order
                               if i == repeat and r.workload == "agrep"))
        self.assertEqual(len(set(firsts)), 3)
        done = {(order[0][0].key(), order[0][1]), (order[5][0].key(), order[5][1])}
        resumed = plan.schedule(done)
        self.assertEqual(len(resumed), expected - 2)
        self.assertFalse(any((r.key(), i) in done for r, i in resumed))


class CountersTest(unittest.TestCase):
    def test_coverage_counts_blocks(self):
        # 10 read requests touching 16 blocks, 12 of them hinted (8 manual + 4 speculative).
        row = stats_row({"demand.reads": 10, "demand.hits": 11, "demand.misses": 5,
                         "hints.manual.consumed": 8, "hints.speculative.consumed": 4,
                         "fuse.read.bytes": 2_000_000, "disk.read.bytes": 3_000_000,
                         "disks": [{"utilization": 0.5}, {"utilization": 0.25}]})
        self.assertEqual(row["blocks_read"], 16)
        self.assertEqual(row["coverage"], 0.75)
        self.assertEqual(row["fuse_read_mb"], 2.0)
        self.assertEqual(row["disk_read_mb"], 3.0)
        self.assertEqual(row["disk_utilization"], 0.375)
        self.assertEqual(stats_row({})["coverage"], "")

    def test_reads_in_flight_and_automatic_sources(self):
        row = stats_row({"disks": [{"queue_depth_seconds_total": 1.5},
                                   {"queue_depth_seconds_total": 0.5}],
                         "hints.history.consumed": 7, "hints.speculative_tainted.consumed": 2,
                         "hints.history.bytes": 3_000_000})
        # measure() divides the disks' request-seconds by the run's seconds.
        self.assertEqual(row["reads_in_flight"], 2.0)
        self.assertEqual(row["history_consumed"], 7)
        self.assertEqual(row["tainted_consumed"], 2)
        self.assertEqual(row["speculative_consumed"], 9)
        self.assertEqual(row["history_hinted_mb"], 3.0)

    def test_tipspec_counters_are_summed_over_processes(self):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "spec"
            path.write_text("tipspec.pid 1\ntipspec.forks 3\ntipspec.restarts 2\n"
                            "tipspec.pid 2\ntipspec.forks 4\ntipspec.restarts 1\n")
            row = tipspec_row(path)
            self.assertEqual(row["spec_forks"], 7)
            self.assertEqual(row["spec_restarts"], 3)
            self.assertEqual(tipspec_row(Path(d) / "missing")["spec_forks"], "")


class BreakdownTest(unittest.TestCase):
    def test_entries_survive_a_truncated_document(self):
        # What tipfs printed after a 102 s run: the tail overflowed its 128-byte buffer.
        text = ('{"fuse_dispatch":{"share":0.002651,"nanos":540370401},"disk_wait":{"share":'
                '0.488603,"nanos":99607847382},"idle":{"share":0.504445,"nanos":102837461312},'
                '"capacity_nanos":203862583034,"operations":12543,"nanos_per_operation":16253096.')
        self.assertEqual(report.breakdown_entries(text),
                         [("fuse_dispatch", 0.002651, 540370401),
                          ("disk_wait", 0.488603, 99607847382),
                          ("idle", 0.504445, 102837461312)])


class ReportTest(unittest.TestCase):
    """A results directory with known times; the tables must say what they imply."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)
        self.plan = Plan(options(workloads=["agrep"], figures=["fig3", "fig6"], ratios=[1, 2]))
        (self.dir / "plan.json").write_text(json.dumps(self.plan.to_json()))
        times = {"original": [10.0, 12.0, 11.0], "manual": [3.0, 2.0, 4.0],
                 "speculating": [3.3, 3.0, 3.6], "native": [0.5, 0.4, 0.6]}
        rows = []
        run_id = 1
        for key, run in self.plan.runs.items():
            ratio = run.slowdown()
            for repeat in range(self.plan.repeats[key]):
                seconds = times[run.variant][repeat] * ratio
                if ratio == 2 and run.variant == "speculating":
                    seconds = times["manual"][repeat] * ratio  # as fast as manual at ratio 2
                row = {c: "" for c in COLUMNS}
                digest = "aaaa"
                if run.variant == "manual" and repeat == 1 and ratio == 1:
                    digest = "bbbb"  # one manual run printed something else
                row.update({"run_id": run_id, "key": key, "workload": run.workload,
                            "variant": run.variant, "fraction": f"{run.fraction:g}",
                            "repeat": repeat, "status": "ok", "elapsed_s": seconds,
                            "scaled_s": seconds / ratio, "output_sha256": digest,
                            "coverage": {"manual": 1.0, "speculating": 0.9}.get(run.variant, 0),
                            "load_before": 5.0})
                rows.append(row)
                run_id += 1
        with open(self.dir / "runs.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
        self.results = report.Results(self.dir)

    def tearDown(self):
        self.tmp.cleanup()

    def table(self, name):
        with open(self.dir / name, newline="") as f:
            return {(r["workload"], r["variant"], r.get("ratio", "")): r for r in csv.DictReader(f)}

    def test_figure3_medians_ratios_and_agreement(self):
        report.write_all(self.results)
        t = self.table("fig3.csv")
        original = t[("agrep", "original", "")]
        self.assertEqual((original["median_s"], original["min_s"], original["max_s"]),
                         ("11.000", "10.000", "12.000"))
        self.assertEqual(t[("agrep", "manual", "")]["ratio_to_original"], f"{3 / 11:.3f}")
        self.assertEqual(t[("agrep", "speculating", "")]["ratio_to_original"], f"{3.3 / 11:.3f}")
        self.assertEqual(t[("agrep", "speculating", "")]["outputs_agree"], "yes")
        self.assertTrue(t[("agrep", "manual", "")]["outputs_agree"].startswith("NO (1 of 3"))
        self.assertEqual(t[("agrep", "original", "")]["paper_s"], "21.4")
        self.assertIn("real timing", t[("agrep", "native", "")]["note"])

    def test_figure6_is_scaled_back_by_the_ratio(self):
        report.write_all(self.results)
        t = self.table("fig6.csv")
        at2 = t[("agrep", "original", "2")]
        self.assertEqual(at2["median_s"], "11.000")       # 22 s measured / ratio 2
        self.assertEqual(at2["raw_median_s"], "22.000")
        self.assertEqual(t[("agrep", "speculating", "2")]["speculating_over_manual"], "1.000")
        self.assertEqual(t[("agrep", "speculating", "1")]["speculating_over_manual"], "1.100")

    def test_first_and_second_run_table(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        directory = Path(tmp.name)
        plan = Plan(options(workloads=["json"], figures=["fig3"], variants=["speculating-2nd"],
                            repeats=1))
        (directory / "plan.json").write_text(json.dumps(plan.to_json()))
        values = {"original": (10.0, "", 4.0, 0.8), "speculating": (8.0, 6.0, 9.0, 1.5),
                  "speculating-2nd": (4.0, 1.0, 8.0, 3.0), "native": (1.0, "", "", "")}
        rows = []
        for n, (key, run) in enumerate(plan.runs.items(), start=1):
            seconds, unused_mb, read_mb, in_flight = values[run.variant]
            row = {c: "" for c in COLUMNS}
            row.update({"run_id": n, "key": key, "workload": run.workload,
                        "variant": run.variant, "fraction": "1", "repeat": 0, "status": "ok",
                        "elapsed_s": seconds, "scaled_s": seconds, "output_sha256": "aa",
                        "hinted_unused_mb": unused_mb, "fuse_read_mb": read_mb,
                        "reads_in_flight": in_flight, "load_before": 1.0})
            rows.append(row)
        with open(directory / "runs.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
        context = {"started": "now", "machine": "test", "load": "1", "scale": "tiny", "seed": 1,
                   "git": "abc"}
        text = report.summary_markdown(report.Results(directory), context)
        # Unused hinted bytes are divided by what the original read (4 MB), not by the
        # speculating run's own reads, which count its children's.
        self.assertRegex(text, r"\| json \| 10\.00 s \| 8\.00 s \| 0\.80 \| 4\.00 s \| 0\.40 \|"
                               r" 1\.50, 0\.25 \| - \| 0\.80, 1\.50, 3\.00 \|")

    def test_summary_names_goals_and_the_caveat(self):
        context = {"started": "now", "machine": "test", "load": "5", "scale": "tiny", "seed": 1,
                   "git": "abc"}
        text = report.summary_markdown(self.results, context)
        self.assertIn("Measured on a shared, loaded machine", text)
        # speculating/original = 3.3/11 = 0.30 > goal 0.28: not met.
        self.assertRegex(text, r"\| agrep \| 11\.00 s \(10\.00-12\.00\) \|.*\| 0\.30 \| 0\.27 \|"
                               r" 0\.30 \| 0\.29 \| <= 0\.28 \| no \|")
        self.assertIn("1 printed something other than the original", text)
        quiet = dict(context, max_load=2.5, cpus=2)
        self.assertIn("Measured on a quiet machine", report.summary_markdown(self.results, quiet))
        busy = dict(context, max_load=6.0, cpus=2)
        self.assertIn("Measured on a shared, loaded machine",
                      report.summary_markdown(self.results, busy))
        # Figure 6's goal: speculating within 5 % of manual at every ratio (1.10 at ratio 1).
        self.assertIn("| agrep | 1: 1.10, 2: 1.00 | 1.10 | <= 1.05 | no |", text)


if __name__ == "__main__":
    unittest.main()
