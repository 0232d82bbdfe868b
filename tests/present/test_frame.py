"""load_results: flattening, tolerance of bad lines and old/new records, derived columns; the Selection."""

from __future__ import annotations

import json
import math
import statistics

import pandas as pd
import pytest
import record_factory as rf

from solbench.present.frame import (
    ResultsError,
    Selection,
    geomean,
    load_results,
    records_frame,
    select,
    select_records,
)


@pytest.fixture(scope="module")
def recordset() -> rf.RecordSet:
    return rf.make_recordset(repeats=2)


@pytest.fixture()
def results_file(tmp_path, recordset):
    return recordset.write(tmp_path / "results" / "run.jsonl")


@pytest.fixture()
def measured_specs(tmp_path, monkeypatch):
    rf.write_measured_spec(tmp_path / "specs")
    monkeypatch.setenv("SOLBENCH_SPECS", str(tmp_path / "specs"))


def test_one_row_per_record_with_nested_fields_flattened(results_file, recordset):
    df = load_results(results_file)
    assert len(df) == len(recordset.records)
    assert df.attrs["warnings"] == []
    first = recordset.records[0]
    row = df.iloc[0]
    assert row["timing.method"] == first.timing["method"]
    assert row["environment.driver"] == first.environment["driver"]
    assert row["telemetry.sm_min_mhz"] == first.telemetry["sm_min_mhz"]
    assert row["environment.packages.torch"] == first.environment["packages"]["torch"]
    assert row["axes.T"] == first.axes["T"]
    assert row["source"].endswith("run.jsonl:1")


def test_bad_lines_are_warned_and_skipped(results_file, recordset):
    good = json.loads(results_file.read_text().splitlines()[0])
    passed_without_time = {**good, "status": "PASSED", "time_s": None, "sol": None}
    passed_at_zero = {**good, "status": "PASSED", "time_s": 0.0, "sol": 0.0, "reason": None, "timing": {}}
    unknown_status = {**good, "status": "EXPLODED"}
    with open(results_file, "a") as fh:
        fh.write("this is not json\n")
        fh.write(json.dumps({"hello": "world"}) + "\n")  # JSON, but not a record
        fh.write(json.dumps(passed_without_time) + "\n")
        fh.write(json.dumps(passed_at_zero) + "\n")
        fh.write(json.dumps(unknown_status) + "\n")
        fh.write(json.dumps(good)[:40])  # a torn last line
    with pytest.warns(UserWarning):
        df = load_results([results_file])
    assert len(df) == len(recordset.records)
    text = "\n".join(df.attrs["warnings"])
    assert len(df.attrs["warnings"]) == 6, text
    n = len(recordset.records)
    for line, expected in ((n + 1, "unreadable line"), (n + 2, "not a result record"),
                           (n + 3, "not a valid record: a PASSED record needs time_s and sol"),
                           (n + 4, "PASSED without a positive time_s"), (n + 5, "not a valid record: status: Input should be 'PASSED'"),
                           (n + 6, "unreadable line")):
        assert f"run.jsonl:{line}: {expected}" in text


def test_older_record_gets_derived_columns():
    # A minimal record with only the contract's keys, as an early version wrote them.
    old = {"problem": "p.q", "workload": "w", "solution": "s", "status": "passed", "device": "GPU",
           "gpu_spec": "h200_sxm", "time_s": 2e-3, "sol": 0.5, "flops": 4_000_000_000, "bytes": 1_000_000,
           "t_ideal_s": 1e-3, "bound": "compute", "timestamp": "2026-01-01T00:00:00Z", "solbench_version": "0.0.1"}
    df = records_frame([old])
    row = df.iloc[0]
    assert row["status"] == "PASSED"
    assert row["roof"] == "datasheet"
    assert row["arithmetic_intensity"] == pytest.approx(4000.0)
    assert row["achieved_flops_per_s"] == pytest.approx(2e12)
    assert row["achieved_bytes_per_s"] == pytest.approx(5e8)
    assert row["tags"] == [] and row["flags"] == []
    assert str(row["timestamp_utc"]).startswith("2026-01-01")


def test_newer_record_keeps_unknown_fields(recordset):
    d = recordset.dicts()[0]
    d["future_field"] = {"nested": 3}
    df = records_frame([d])
    assert df.iloc[0]["future_field.nested"] == 3


def test_non_numeric_numbers_become_nan(recordset):
    # records_frame takes dicts from anywhere (load_results' reader refuses these lines outright).
    d = recordset.dicts()[0]
    d["arithmetic_intensity"] = "lots"
    d["t_memory_s"] = float("nan")
    row = records_frame([d]).iloc[0]
    assert row["arithmetic_intensity"] == pytest.approx(d["flops"] / d["bytes"])  # refilled from flops/bytes
    assert math.isnan(row["t_memory_s"])


def test_infinite_numbers_leave_the_record_out(recordset):
    d = {**recordset.dicts()[0], "_source": "r.jsonl:7", "t_memory_s": float("inf")}
    df = records_frame([d])
    assert df.empty and df.attrs["warnings"] == ["r.jsonl:7: t_memory_s is infinite, record left out"]


@pytest.mark.parametrize("stamp", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
def test_a_date_no_formatter_can_show_counts_as_none(recordset, tmp_path, stamp):
    """A timestamp at the edge of the calendar (year 0 or 10000 once in UTC): no date, and report
    and history show the record (they raised in strftime)."""
    from typer.testing import CliRunner

    from solbench.cli import app

    d = {**recordset.dicts()[0], "timestamp": stamp}
    assert records_frame([d])["timestamp_utc"].isna().all()
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(d) + "\n")
    for args in (["history", str(path)], ["report", str(path), "-o", str(tmp_path / "r.html")]):
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 0 and res.exception is None, (args, res.output, res.exception)


def test_same_records_read_twice_are_not_duplicated(results_file, recordset):
    df = load_results([results_file, results_file.parent])
    assert len(df) == len(recordset.records)


def test_measured_spec_records_share_the_gpu_of_their_datasheet(results_file, measured_specs):
    df = load_results(results_file)
    measured = df[df["roof"] == "measured"]
    assert not measured.empty
    assert set(measured["gpu_spec"]) == {rf.MEASURED_SPEC_ID}
    assert set(measured["gpu"]) == {"h200_sxm"}


def test_unknown_spec_keeps_its_own_id(recordset):
    d = recordset.dicts()[0]
    d["gpu_spec"] = "not_a_known_gpu"
    assert records_frame([d]).iloc[0]["gpu"] == "not_a_known_gpu"


def test_select_filters(results_file, measured_specs):
    df = load_results(results_file)
    s = select(df, Selection(problem="toy.*", gpu="H100", candidate=["torch_*", "cupy_raw"]))
    assert set(s["problem"]) == {"toy.rmsnorm", "toy.scan_fp32"}
    assert set(s["gpu"]) == {"h100_sxm"}  # matched on the device name
    assert set(s["solution"]) == {"torch_eager", "cupy_raw"}
    assert set(s["roof"]) == {"datasheet"}
    # The same rows, computed here from the columns without the filter code.
    want = df[df["problem"].str.startswith("toy.") & df["device"].str.contains("H100")
              & df["solution"].isin(["torch_eager", "cupy_raw"]) & (df["roof"] == "datasheet")]
    assert sorted(s.index) == sorted(want.index)
    assert set(select(df, Selection(tag="norm"))["problem"]) == {"toy.rmsnorm"}
    measured = select(df, Selection(roof="measured"))
    assert set(measured["roof"]) == {"measured"} and set(measured["gpu"]) == {"h200_sxm"}


@pytest.mark.parametrize("kwargs, message", [
    ({"problem": "nope"}, "--problem nope matches no record"),
    ({"gpu": "mi300x"}, "--gpu mi300x matches no record"),
    ({"tag": "nothing"}, "--tag nothing matches no problem"),
    ({"candidate": "ghost"}, "--candidate ghost matches no record"),
    ({"roof": "sideways"}, "--roof sideways: no records scored against that roof"),
])
def test_select_errors_name_the_filter_and_what_exists(results_file, kwargs, message):
    df = load_results(results_file)
    with pytest.raises(ResultsError, match=message):
        select(df, Selection(**kwargs))


def test_select_on_no_records_says_what_to_pass():
    with pytest.raises(ResultsError, match="no result records found"):
        select(records_frame([]))


def test_selection_keeps_each_filter_as_a_tuple():
    sel = Selection(problem="a.*", gpu=["h200", "h100"], tag=None, roof="measured")
    assert (sel.problem, sel.gpu, sel.tag, sel.candidate, sel.roof) == (("a.*",), ("h200", "h100"), (), (),
                                                                         "measured")
    assert Selection() == Selection(problem=[], gpu=None, tag=(), candidate=[])
    with pytest.raises(AttributeError):
        sel.roof = "datasheet"  # type: ignore[misc]  # frozen: one selection, passed down unchanged


def test_no_selection_is_everything_against_one_roof(results_file):
    df = load_results(results_file)
    everything = select(df)
    assert sorted(everything.index) == sorted(df.index[df["roof"] == "datasheet"])
    assert select(df, Selection()).equals(everything)


@pytest.mark.parametrize("bad, message", [
    ("results/", "got a str; load files once with solbench.load_results"),
    ([{"problem": "p"}], "got a list; load files once"),
])
def test_select_takes_a_frame_not_paths(bad, message):
    with pytest.raises(ResultsError, match=message):
        select(bad)


def test_select_takes_a_selection_not_a_string(results_file):
    with pytest.raises(ResultsError, match="selection: got a str; pass a solbench.Selection"):
        select(load_results(results_file), "h200")  # type: ignore[arg-type]


def test_roof_measured_only_results_pick_measured(recordset):
    only_measured = [d for d in recordset.dicts() if d["roof"] == "measured"]
    df = records_frame(only_measured)
    assert set(select(df)["roof"]) == {"measured"}
    with pytest.raises(ResultsError, match="pass --roof measured"):
        select(df, Selection(roof="datasheet"))


def test_geomean_matches_statistics_and_guards_zero_and_missing():
    values = [0.5, 0.8, 0.9, 0.25]
    assert geomean(values) == pytest.approx(statistics.geometric_mean(values))
    assert geomean([*values, None, float("nan")]) == pytest.approx(statistics.geometric_mean(values))
    assert geomean([0.0, 1.0]) == pytest.approx(math.sqrt(1e-6))  # floored, not zero and not an error
    assert geomean([]) is None and geomean([None]) is None
    assert isinstance(geomean(pd.Series([1.0, 4.0])), float)


def test_public_names():
    import solbench
    from solbench.present import plots, ranking, report

    assert solbench.load_results is load_results and solbench.Selection is Selection
    assert solbench.leaderboard is ranking.leaderboard and solbench.Leaderboard is ranking.Leaderboard
    assert solbench.plot_roofline is plots.plot_roofline and solbench.plot_sol is plots.plot_sol
    assert solbench.write_report is report.write_report
    assert {"load_results", "Selection", "leaderboard", "plot_roofline", "plot_sol", "write_report"} <= set(
        solbench.__all__)


def test_public_functions_take_a_frame_not_paths(results_file, tmp_path):
    import solbench

    calls = (lambda: solbench.leaderboard(results_file), lambda: solbench.plot_sol([results_file], tmp_path / "s.png"),
             lambda: solbench.plot_roofline(str(results_file), tmp_path / "r.svg"),
             lambda: solbench.write_report(results_file, tmp_path / "r.html"))
    for call in calls:
        with pytest.raises(ResultsError, match="load files once with solbench.load_results"):
            call()
    assert not (tmp_path / "r.html").exists()


# --- impossible numbers: left out with a warning, never ranked ----------------------------------

@pytest.mark.parametrize("change, reason", [
    ({"sol": 1e308}, "sol 1e+308 is impossible (above 10: no kernel runs 10 times faster than its roof"),
    ({"sol": 10.5}, "sol 10.5 is impossible (above 10"),
    ({"time_s": -1.0}, "time_s -1 is impossible (negative)"),
    ({"flops": 10**31}, "flops 1e+31 is impossible (above 1e+30)"),
    ({"t_ideal_s": float("inf")}, "t_ideal_s is infinite"),
    ({"time_s": 1e-300, "achieved_flops_per_s": None}, "achieved_flops_per_s 3.36e+307 is impossible (above 1e+30)"),
])
def test_impossible_numbers_leave_the_record_out_with_a_warning(recordset, change, reason):
    good = [d for d in recordset.dicts() if d["status"] == "PASSED" and d["flops"] > 0][:2]
    bad = {**good[0], **change, "run_id": "bad", "_source": "r.jsonl:9"}
    df = records_frame([*good, bad])
    assert len(df) == 2 and "bad" not in set(df["run_id"])
    (warning,) = df.attrs["warnings"]
    assert warning.startswith(f"r.jsonl:9: {reason}") and warning.endswith(", record left out")


def test_a_sol_up_to_the_limit_is_kept_and_flagged_when_above_one(recordset):
    d = next(d for d in recordset.dicts() if d["status"] == "PASSED")
    df = records_frame([{**d, "sol": 10.0}])
    assert df.attrs["warnings"] == [] and df.iloc[0]["sol"] == 10.0


def test_a_record_spec_id_is_never_opened_as_a_path(recordset, tmp_path):
    spec = tmp_path / "evil.yaml"
    spec.write_text("id: evil\nkind: measured\nbased_on: h200_sxm\n")
    d = {**recordset.dicts()[0], "gpu_spec": str(spec)}
    assert records_frame([d]).iloc[0]["gpu"] == str(spec)


def test_error_messages_show_record_text_cleaned(recordset):
    d = {**recordset.dicts()[0], "problem": "evil\x1b[2J.name" + "x" * 500}
    with pytest.raises(ResultsError) as err:
        select(records_frame([d]), Selection(problem="nope"))
    assert "\x1b" not in str(err.value) and "evil\ufffd[2J.name" in str(err.value) and len(str(err.value)) < 300


# --- one roof per GPU: every GPU shown, what is left out said ------------------------------------

def cpu_records(recordset, n: int = 4) -> list[dict]:
    """CPU results (the built-in estimate roof) of a few workloads, as `solbench run --device cpu` writes."""
    passed = [d for d in recordset.dicts() if d["status"] == "PASSED" and d["gpu_spec"] == "h200_sxm"][:n]
    return [{**d, "gpu_spec": "cpu_estimate", "roof": "estimate", "device": "AMD EPYC 9654", "device_type": "cpu",
             "solution": "my_cpu", "sol": 0.01, "time_s": d["t_ideal_s"] / 0.01} for d in passed]


def test_cpu_results_get_their_own_gpu_next_to_gpu_results(recordset):
    df = records_frame([*recordset.dicts(), *cpu_records(recordset)])
    records, left_out = select_records(df)
    shown = records.groupby("gpu")["roof"].unique().map(list).to_dict()
    assert shown == {"cpu_estimate": ["estimate"], "h100_sxm": ["datasheet"], "h200_sxm": ["datasheet"]}
    n_measured = int((df["roof"] == "measured").sum())
    assert left_out == [f"h200_sxm: {n_measured} record(s) against the measured roof not shown (one roof per GPU): "
                        "pass --roof measured to see them"]


def test_a_roof_asked_for_leaves_out_the_gpus_without_it(recordset):
    df = records_frame([*recordset.dicts(), *cpu_records(recordset)])
    records, left_out = select_records(df, Selection(roof="measured"))
    assert set(records["roof"]) == {"measured"} and set(records["gpu"]) == {"h200_sxm"}
    counts = df.groupby(["gpu", "roof"]).size()
    assert left_out == [
        f"cpu_estimate: {counts['cpu_estimate', 'estimate']} record(s) against the estimate roof not shown "
        "(one roof per GPU): pass --roof estimate to see them",
        f"h100_sxm: {counts['h100_sxm', 'datasheet']} record(s) against the datasheet roof not shown "
        "(one roof per GPU): pass --roof datasheet to see them",
        f"h200_sxm: {counts['h200_sxm', 'datasheet']} record(s) against the datasheet roof not shown "
        "(one roof per GPU): pass --roof datasheet to see them"]


def test_measured_records_without_their_spec_file_join_the_gpu_of_their_device(recordset):
    df = records_frame(recordset.dicts())  # no measured spec file: based_on cannot be followed
    measured = df[df["roof"] == "measured"]
    assert set(measured["gpu_spec"]) == {rf.MEASURED_SPEC_ID} and set(measured["gpu"]) == {"h200_sxm"}
