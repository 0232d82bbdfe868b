"""`solbench profile` on the CPU under a stand-in ncu (tests/fixtures/ncu/fake_ncu.py), and the metric
names profiling asks ncu for, checked against what ncu 2025.3 lists and exports on the H200."""

from __future__ import annotations

import csv
import json
import os
import re
import sys
import time
from pathlib import Path

import pytest

from solbench.data.ncu import read_raw_csv
from solbench.data.profile import profile_from_kernels
from solbench.data.results import read_records
from solbench.engine import profiling

TESTS = Path(__file__).resolve().parents[1]
NCU = TESTS / "fixtures" / "ncu"
SCALED_ADD = TESTS / "fixtures" / "tiny" / "scaled_add"
HONEST = TESTS / "candidates" / "honest.py"
SCALE_KERNEL = 14  # the probe's Triton `_scale` (x * 2 over 64 MiB of fp32)
# A metric is a base name, a roll-up over units (sum, avg, min, max) and optionally a sub-metric.
ROLLUPS = ("sum", "avg", "min", "max")
SUBMETRICS = ("peak_sustained", "per_second", "per_cycle_elapsed", "per_cycle_active", "pct_of_peak_sustained_elapsed",
              "pct_of_peak_sustained_active")


def _queried() -> dict[str, str]:
    """``ncu --query-metrics`` on the H200: base name -> type (Counter, Throughput, Ratio)."""
    lines = (NCU / "query_metrics_gh100.txt").read_text().splitlines()
    return {parts[0]: parts[1] for parts in (ln.split() for ln in lines) if len(parts) > 1}


def _exported() -> set[str]:
    """Every column of the probe's raw export (full metric names ncu collected on the H200)."""
    with open(NCU / "probe_raw.csv", encoding="utf-8") as fh:
        return set(next(csv.reader(fh)))


def _accepted(metric: str, queried: dict[str, str], exported: set[str]) -> bool:
    if metric in exported:
        return True
    base, _, rest = metric.partition(".")
    rollup, _, sub = rest.partition(".")
    if queried.get(base) == "Throughput":  # a percentage of peak: no sum of units to ask for
        return rollup in ROLLUPS and sub.startswith("pct_of_peak_sustained_")
    return queried.get(base) == "Counter" and rollup in ROLLUPS and sub in ("", *SUBMETRICS)


def test_every_requested_metric_is_one_ncu_accepts_on_gh100():
    queried, exported = _queried(), _exported()
    assert len(queried) > 150 and "dram__bytes_read" in queried and len(exported) > 2000  # the fixtures are whole
    refused = [m for m in profiling.METRICS if not _accepted(m, queried, exported)]
    assert refused == []
    bases = {m.split(".")[0] for m in profiling.METRICS}
    assert bases <= set(queried) | {c.split(".")[0] for c in exported}


def test_the_check_refuses_names_ncu_does_not_know():
    queried, exported = _queried(), _exported()
    assert not _accepted("lts__t_bytes_total.sum", queried, exported)  # no such counter
    assert not _accepted("dram__throughput.sum", queried, exported)  # a throughput has no sum of bytes
    assert not _accepted("dram__bytes.median", queried, exported)  # no such roll-up
    assert _accepted("dram__throughput.avg.pct_of_peak_sustained_elapsed", queried, exported)


# --- the whole path under a stand-in ncu ------------------------------------------------------------

@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """The stand-in ncu first on PATH; returns a function that writes its settings."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "ncu"
    exe.write_text(f"#!{sys.executable}\n" + (NCU / "fake_ncu.py").read_text())
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.delenv("SOLBENCH_NCU", raising=False)
    monkeypatch.setattr(profiling, "PROFILED_DEVICES", ("cuda", "cpu"))  # the one thing a CPU run needs
    log = tmp_path / "ncu_calls.jsonl"

    def configure(**conf):
        conf = {"csv": str(NCU / "probe_raw.csv"), "kernels": [SCALE_KERNEL], "log": str(log), **conf}
        exe.with_suffix(".json").write_text(json.dumps(conf))
        return log

    return configure


def _profile(monkeypatch, capsys, out: Path, *more: str) -> tuple[int, str]:
    from solbench.cli import main

    monkeypatch.setattr(sys, "argv", ["solbench", "profile", str(SCALED_ADD), "-s", str(HONEST), "--device", "cpu",
                                      "--budget", "0.05", "--compile-timeout", "120", "-q", "-o", str(out), *more])
    with pytest.raises(SystemExit) as info:
        main()
    return info.value.code, capsys.readouterr().out


def test_profile_under_ncu_gives_the_record_the_exports_counters(stand_in, monkeypatch, capsys, tmp_path):
    log = stand_in()
    out = tmp_path / "profiles.jsonl"
    code, printed = _profile(monkeypatch, capsys, out)
    assert code == 0, printed
    (rec,) = read_records([out])[0]
    assert rec["status"] == "PASSED" and rec["workload"] == "n131072"  # the largest workload by default
    assert rec["time_s"] > 0 and rec["sol"] > 0
    p = rec["profile"]
    assert p["status"] == "ok" and p["tool_version"].startswith("Version 2025.3.1.0")
    # The same numbers as the stored export read directly
    expected = profile_from_kernels([k for k in read_raw_csv(str(NCU / "probe_raw.csv")) if k.id == SCALE_KERNEL],
                                    "float32")
    assert [k["name"] for k in p["kernels"]] == ["_scale"]
    for key in ("duration_s", "dram_bytes", "dram_read_bytes", "flops", "dram_pct", "diagnosis"):
        assert p["summary"][key] == pytest.approx(getattr(expected.summary, key)), key
    assert p["summary"]["dram_read_bytes"] == pytest.approx(64 * 2**20, rel=0.01)
    # The worker ran under ncu with the options profiling promises; its pid is the one kept
    calls = [json.loads(ln) for ln in log.read_text().splitlines()]
    launch = next(c for c in calls if "--export" in c["options"])
    assert launch["options"]["--clock-control"] == ["none"] and launch["options"]["--profile-from-start"] == ["off"]
    assert launch["options"]["--metrics"] == [",".join(profiling.METRICS)]
    assert launch["command"][1:3] == ["-m", "solbench.worker"] and "--profiler" in launch["command"]
    assert p["process_id"] is not None and p["options"][:2] == ["--target-processes", "all"]
    raw = out.with_suffix(".ncu") / Path(p["raw"]).name
    assert raw.is_file() and not list(out.with_suffix(".ncu").glob("*.ncu-rep"))  # CSV kept, report not
    assert "bandwidth bound (DRAM)" in printed and "1 of 1 profiled" in printed


@pytest.mark.parametrize(("fail", "reason"), [("start", "ERR_NVGPUCTRPERM"), ("import", "Failed to import report")])
def test_a_failing_ncu_leaves_the_record_and_says_why_in_one_line(stand_in, monkeypatch, capsys, tmp_path, fail,
                                                                   reason):
    stand_in(fail=fail)
    out = tmp_path / "profiles.jsonl"
    code, printed = _profile(monkeypatch, capsys, out, "--workload", "n4")
    assert code == 1  # not everything was profiled
    (rec,) = read_records([out])[0]
    assert rec["status"] == "PASSED" and rec["time_s"] > 0  # the run's record stands
    p = rec["profile"]
    assert p["status"] == "failed" and reason in p["reason"]
    assert "\n" not in p["reason"] and len(p["reason"]) <= 300
    assert p["kernels"] == [] and "0 of 1 profiled" in printed


def test_one_line_reason_folds_and_cuts():
    text = "the worker under ncu did not start:\n  ==ERROR== x\n" + "y" * 500
    line = profiling.one_line_reason(text)
    assert "\n" not in line and len(line) == 300 and line.endswith("...")
    assert re.match(r"the worker under ncu did not start: ==ERROR== x y+", line)


def test_only_keeps_the_candidates_whose_name_matches():
    from solbench import api
    from solbench.engine.planning import only_candidates
    from solbench.errors import SolbenchError

    plan = api.plan_run([TESTS / "fixtures" / "tiny" / "ragged_sum"])
    assert [c.name for c in only_candidates(plan, ["torch_*"])[0].candidates] == ["torch_eager"]
    with pytest.raises(SolbenchError, match=r"--only triton_\*: no candidate"):
        only_candidates(api.plan_run([TESTS / "fixtures" / "tiny" / "ragged_sum"]), ["triton_*"])


def test_the_h200_specs_cache_bandwidths_are_ncus_peaks():
    """l2_bandwidth and l1_bandwidth of h200_sxm, recomputed from the probe's own peak metrics."""
    from solbench.data.hardware import load_spec

    k = read_raw_csv(str(NCU / "probe_raw.csv"))[SCALE_KERNEL]
    l2 = k.metrics["derived__lts__lts2xbar_bytes.sum.peak_sustained"] * k.metrics["lts__cycles_elapsed.avg.per_second"]
    l1_per_cycle = k.metrics["derived__l1tex__lsu_writeback_bytes_mem_lgds.sum.peak_sustained"]
    spec = load_spec("h200_sxm")
    assert spec.l2_bandwidth == pytest.approx(l2, rel=0.01)
    assert spec.l1_bandwidth == pytest.approx(l1_per_cycle * spec.clock_mhz_assumed * 1e6, rel=0.001)
    assert l1_per_cycle == 128 * spec.sm_count


@pytest.mark.slow
def test_the_next_pairs_worker_under_ncu_starts_before_this_pair_is_exported(stand_in, monkeypatch, capsys, tmp_path):
    """Two candidates: the second one's ncu launch comes before the first one's export, i.e. its worker
    was started while the first pair was still being profiled; both profiles are whole."""
    log = stand_in()
    second = tmp_path / "honest_too.py"
    second.write_text(HONEST.read_text())
    out = tmp_path / "profiles.jsonl"
    code, printed = _profile(monkeypatch, capsys, out, "-s", str(second), "--workload", "n4")
    assert code == 0, printed
    records = read_records([out])[0]
    assert [r["solution"] for r in records] == ["honest", "honest_too"]
    assert all(r["profile"]["status"] == "ok" and set(r["profile"]["phases_s"]) >= {"start_s", "profiled_call_s",
                                                                                    "export_s"} for r in records)
    calls = [json.loads(ln) for ln in log.read_text().splitlines()]
    kinds = ["launch" if "--export" in c["options"] else "export" for c in calls if "--version" not in c["options"]]
    assert kinds == ["launch", "launch", "export", "export"]  # one by one it would be launch, export, launch, ...


def test_a_record_is_written_once_its_export_is_in_and_before_the_next_record(monkeypatch):
    """The export of a report (host work) overlaps the next item: its record waits for it, is written
    before the next record, with its profile and the wall it had when it was done."""
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor
    from types import SimpleNamespace

    from solbench.engine.ledger import Ledger
    from solbench.engine.runner import Runner

    written: list[tuple[str, object, float]] = []
    monkeypatch.setattr(Runner, "_emit", lambda self, record, ledger: written.append(
        (record.name, record.profile, ledger.wall())))
    runner = profiling.ProfilingRunner.__new__(profiling.ProfilingRunner)
    runner._exports, runner._deferred, runner._pending = ThreadPoolExecutor(max_workers=1), {}, None
    release = threading.Event()
    first, second, failed = (SimpleNamespace(name=n, profile=None) for n in ("first", "second", "failed"))
    runner._deferred[id(first)] = runner._exports.submit(lambda: release.wait(5) and "profile of first")
    done = Ledger(start=time.monotonic() - 2.0)
    runner._emit(first, done)
    assert written == []  # its export is still going
    time.sleep(0.2)
    release.set()
    runner._deferred[id(second)] = runner._exports.submit(lambda: "profile of second")
    runner._emit(second, Ledger())
    assert [w[:2] for w in written] == [("first", "profile of first")]
    assert 2.0 <= written[0][2] < 2.2  # the wall when it was done, not when its export came in
    runner._emit(failed, Ledger())  # a record with no export pending: after the one before it
    assert [w[:2] for w in written] == [("first", "profile of first"), ("second", "profile of second"),
                                        ("failed", None)]
    runner._exports.shutdown()


@pytest.fixture
def gate_log(monkeypatch):
    """The profiling run's device-gate log: ``gate_log.intervals()`` so far; ``gate_log.hold(ready)``
    makes the n-th guarded run's recheck (one run at a time) wait, at most 60 s, until
    ``ready(intervals, n)``: what is to happen beside it, did."""
    from types import SimpleNamespace

    from solbench.engine import evaluation

    runners: list[profiling.ProfilingRunner] = []
    run, recheck = profiling.ProfilingRunner.run, evaluation._recheck_timed
    monkeypatch.setattr(profiling.ProfilingRunner, "run", lambda self, plan: runners.append(self) or run(self, plan))
    log = SimpleNamespace(intervals=lambda: list(runners[0].gate.intervals), rechecks=0)

    def hold(ready):
        def waiting_recheck(ctx, reply, plan):
            log.rechecks += 1
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not ready(log.intervals(), log.rechecks):
                time.sleep(0.02)
            return recheck(ctx, reply, plan)

        monkeypatch.setattr(evaluation, "_recheck_timed", waiting_recheck)

    log.hold = hold
    return log


def _profiled_ok(monkeypatch, capsys, out: Path, *more: str) -> list[dict]:
    """The records of a `solbench profile` run that exited 0, all PASSED with a profile."""
    code, printed = _profile(monkeypatch, capsys, out, *more)
    assert code == 0, printed
    records = read_records([out])[0]
    assert all(r["status"] == "PASSED" and r["profile"]["status"] == "ok" for r in records)
    return records


@pytest.mark.slow
def test_the_warm_up_under_ncu_runs_beside_the_guarded_run_and_the_profiled_call_alone(stand_in, monkeypatch, capsys,
                                                                                        tmp_path, gate_log):
    """Each pair's worker under ncu loads and makes its warm-up call while its own guarded run still
    rechecks (after that run's timing and burst, never before); each profiled call and each timing
    held the device alone (the gate's log: no request of either pair overlaps one); the workers' exits
    (under ncu, with its report, and the guarded one) go on in the background, before the next timing."""
    from solbench.engine.gate import overlaps

    stand_in()
    gate_log.hold(lambda log, n: sum(i.kind == "warmup" for i in log) >= n)
    second = tmp_path / "honest_too.py"
    second.write_text(HONEST.read_text())
    records = _profiled_ok(monkeypatch, capsys, tmp_path / "profiles.jsonl", "-s", str(second), "--workload", "n4")
    assert [r["solution"] for r in records] == ["honest", "honest_too"]
    log = gate_log.intervals()
    assert overlaps(log) == []  # nothing beside a timing, a burst or a profiled call
    for name in ("honest", "honest_too"):
        mine = [i for i in log if i.owner.endswith(f"/{name}")]
        ncu = [i for i in log if i.owner.endswith(f"/{name}/ncu")]
        kinds = [i.kind for i in ncu]
        assert kinds[:2] == ["load", "warmup"] and kinds[-2:] == ["profile", "profile_exit"], kinds
        warmup = ncu[kinds.index("warmup")]
        timed_end = max(i.end for i in mine if i.kind in ("time", "burst"))
        rechecked = next(i for i in mine if i.kind == "recheck")
        assert timed_end <= ncu[0].start  # no code of the worker under ncu alive during its pair's timing
        assert warmup.start < rechecked.end  # prepared beside its own guarded run, not after it
        profiled = ncu[kinds.index("profile")]
        assert profiled.exclusive and profiled.start >= rechecked.end
    assert all({"start_s", "warmup_call_s", "warmup_wait_s", "profiled_call_s", "report_s", "export_s"}
               == set(r["profile"]["phases_s"]) for r in records)
    # The first pair's worker under ncu and its guarded worker are stopped in the background, each
    # holding the gate shared until gone: both before the second pair's timing.
    first_exit = next(i for i in log if i.kind == "profile_exit" and i.owner.endswith("/honest/ncu"))
    first_retired = next(i for i in log if i.kind == "retire" and i.owner.endswith("/honest"))
    second_timing = next(i for i in log if i.kind == "time" and i.owner.endswith("/honest_too"))
    assert max(first_exit.end, first_retired.end) <= second_timing.start


@pytest.mark.slow
def test_the_next_records_inputs_are_made_beside_this_ones_recheck_before_its_profiled_call(
        stand_in, monkeypatch, capsys, tmp_path, gate_log):
    """Two workloads: n32's inputs and references are made after n4's burst, beside n4's recheck, and
    done before n4's profiled call (which holds the device alone); n32's record takes them (made once)."""
    from solbench.engine.gate import overlaps

    stand_in()
    gate_log.hold(lambda log, n: n > 1 or any(i.kind == "cases" and i.owner == "tiny.scaled_add/n32" for i in log))
    records = _profiled_ok(monkeypatch, capsys, tmp_path / "profiles.jsonl", "--workload", "n4", "--workload", "n32")
    assert [r["workload"] for r in records] == ["n4", "n32"]
    log = gate_log.intervals()
    assert overlaps(log) == []
    made = [i for i in log if i.kind == "cases" and i.owner == "tiny.scaled_add/n32"]
    assert len(made) == 1, made
    # The burst's end: its timing's window (the first burst runs in it) or a second burst's own.
    burst = max(i.end for i in log if i.kind in ("time", "burst") and i.owner == "tiny.scaled_add/n4/honest")
    rechecked = next(i for i in log if i.kind == "recheck" and i.owner == "tiny.scaled_add/n4/honest")
    profiled = next(i for i in log if i.kind == "profile" and i.owner == "tiny.scaled_add/n4/honest/ncu")
    assert burst <= made[0].start < rechecked.end and made[0].end <= profiled.start


def test_the_throughput_benchmark_gives_each_pair_its_own_span(tmp_path, monkeypatch):
    """benchmarks/profile_throughput.py: a record written while the next pair runs (its export) is
    charged from its pair's start to the next pair's, the last one to its record; not its successor's."""
    import importlib.util
    from types import SimpleNamespace

    spec = importlib.util.spec_from_file_location("profile_throughput", TESTS.parent / "benchmarks" /
                                                  "profile_throughput.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    tally = bench.Tally(tmp_path / "t.json", 3, 0.0, [])
    now = [0.0]
    tally.clock, tally.t0 = lambda: now[0], 0.0

    def rec(name):
        return SimpleNamespace(problem="p", workload="w", solution=name, status="PASSED", profile=None, reason=None)

    for at, step in ((10.0, "start a"), (13.0, "start b"), (20.0, "a"), (20.5, "start c"), (27.0, "b"), (28.0, "c")):
        now[0] = at
        if step.startswith("start "):
            tally.task("p", "w", step[6:])
        else:
            tally.record(rec(step))
    assert [r["pair_s"] for r in tally.rows] == [3.0, 7.5, 7.5]  # 10->13, 13->20.5, 20.5->28
    assert tally.doc["startup_s"] == 10.0 and tally.doc["median_pair_s"] == 7.5 and tally.doc["wall_s"] == 28.0
