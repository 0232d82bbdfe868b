"""The results store loses nothing under concurrent writers and survives torn lines; its reader checks
every line against the record schema and skips what fails with ``file:line: reason``, never raising."""

import json
import multiprocessing as mp
import os
from pathlib import Path

import pytest

from solbench.data.record import ResultRecord
from solbench.data.results import MAX_DEPTH, append_records, parse_record_line, read_records

ROOT = Path(__file__).resolve().parents[2]


def record(**fields) -> dict:
    """A valid record (a failed one: no time or SOL needed), with ``fields`` changed or added."""
    base = {"problem": "toy.add", "workload": "w", "solution": "cand", "status": "INCORRECT", "device": "cpu",
            "gpu_spec": "cpu_estimate", "time_s": None, "sol": None, "flops": 0, "bytes": 8, "t_ideal_s": 1e-9,
            "bound": "memory", "timestamp": "2026-11-30T00:00:00+00:00", "solbench_version": "0.1.0",
            "reason": "wrong output"}
    return {**base, **fields}


def _writer(path: str, who: int, n: int) -> None:
    for i in range(n):
        # Long lines (5 kB reasons) make torn or interleaved writes likely if appends were not atomic.
        append_records(path, [record(solution=f"w{who}", workload=f"i{i}", reason="x" * 5000)])


def test_concurrent_appends_lose_nothing(tmp_path):
    path = str(tmp_path / "r.jsonl")
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, w, 40)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    records, warnings = read_records([path])
    assert not warnings
    assert sorted((int(r["solution"][1:]), int(r["workload"][1:])) for r in records) == \
        [(w, i) for w in range(4) for i in range(40)]


def test_torn_line_is_skipped_and_next_append_starts_clean(tmp_path):
    path = tmp_path / "r.jsonl"
    append_records(path, [record(problem="a.x")])
    with open(path, "a") as fh:
        fh.write('{"problem": "torn", "sta')  # a writer killed mid-line
    append_records(path, [ResultRecord.model_validate(record(problem="b.x"))])
    records, warnings = read_records([path])
    assert [r["problem"] for r in records] == ["a.x", "b.x"]
    assert warnings == [f"{path}:2: unreadable line skipped (Invalid control character at)"]
    assert all(json.loads(line) for line in path.read_text().splitlines()[-1:])


def test_folders_and_missing_paths(tmp_path):
    append_records(tmp_path / "sub" / "x.jsonl", [record()])
    (tmp_path / "sub" / "folder.jsonl").mkdir()  # a folder with the suffix is not a results file
    records, warnings = read_records([tmp_path, tmp_path / "missing.jsonl"])
    assert len(records) == 1 and warnings == [f"{tmp_path / 'missing.jsonl'}: no such file or folder"]


def test_gzipped_records_read_as_plain_ones_and_a_cut_gzip_keeps_what_it_holds(tmp_path):
    """A ``.jsonl.gz`` file (committed results are gzipped) reads line by line like a ``.jsonl``, alone or in a
    folder; one cut short keeps the records before the cut and says, in one warning, that the rest is unreadable."""
    import gzip

    lines = [json.dumps(record(problem=f"p.{i}")) + "\n" for i in range(200)]
    whole = tmp_path / "runs" / "a.jsonl.gz"
    whole.parent.mkdir()
    whole.write_bytes(gzip.compress("".join(lines).encode()))
    append_records(tmp_path / "runs" / "b.jsonl", [record(problem="plain.x")])
    records, warnings = read_records([tmp_path / "runs"])
    assert not warnings and [r["problem"] for r in records] == [f"p.{i}" for i in range(200)] + ["plain.x"]
    assert records[0]["_source"] == f"{whole}:1"
    cut = tmp_path / "cut.jsonl.gz"
    data = gzip.compress("".join(lines).encode(), compresslevel=0)  # stored: the cut falls mid-record, not mid-block
    cut.write_bytes(data[: len(data) // 2])
    records, warnings = read_records([cut])
    assert 0 < len(records) < 200 and [r["problem"] for r in records] == [f"p.{i}" for i in range(len(records))]
    assert len(warnings) <= 2 and warnings[-1].startswith(f"{cut}: unreadable (") and warnings[-1].endswith("skipped")


def test_a_fifo_is_not_read(tmp_path):
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)  # opening it would wait for a writer forever
    assert read_records([fifo]) == ([], [f"{fifo}: not a regular file or folder, skipped"])
    assert read_records([tmp_path]) == ([], [])


def test_committed_results_are_all_valid():
    records, warnings = read_records([ROOT / "results"])
    assert warnings == [] and len(records) >= 97


HOSTILE = {
    "nested 100,000 deep": ("[" * 100_000 + "]" * 100_000,
                            f"not a valid record: nested more than {MAX_DEPTH} levels deep, line skipped"),
    "nested 500 deep in a field": (json.dumps(record())[:-1] + ', "x": ' + "[" * 500 + "]" * 500 + "}",
                                   f"not a valid record: nested more than {MAX_DEPTH} levels deep, line skipped"),
    "a 5,001-digit integer": (json.dumps(record())[:-1] + ', "x": ' + "9" * 5001 + "}",
                              "unreadable line skipped (an integer of 5001 digits, beyond 64 bits)"),
    "an integer beyond 64 bits": (json.dumps(record(flops=2**64)),
                                  "unreadable line skipped (an integer of 20 digits, beyond 64 bits)"),
    "a problem named a list": (json.dumps(record(problem=["a", "b"])),
                               "not a valid record: problem: Input should be a valid string, line skipped"),
    "flops 'lots'": (json.dumps(record(flops="lots")), "not a valid record: flops: Input should be a valid "
                     "integer, unable to parse string as an integer, line skipped"),
    "tags as a dict": (json.dumps(record(tags={"a": 1})),
                       "not a valid record: tags: Input should be a valid list, line skipped"),
    "environment as a string": (json.dumps(record(environment="x")),
                                "not a valid record: environment: Input should be a valid dictionary, line skipped"),
    "two wrong fields": (json.dumps(record(device=1, bytes=[])),
                         "not a valid record: device: Input should be a valid string (and 1 more), line skipped"),
    "an array": ("[1, 2]", "not a result record, line skipped"),
    "a sol on a failed record": (json.dumps(record(sol=0.5)), "not a valid record: status INCORRECT: time_s "
                                 "and sol must be null unless PASSED, line skipped"),
    "an escape sequence as a key": (json.dumps(record(**{"\ud800\x1b[2J": 1})), "not a valid record: Input should "
                                    "be a valid string, unable to parse raw data as a unicode string, line skipped"),
}


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_line_is_skipped_with_file_line_and_reason(tmp_path, name):
    line, reason = HOSTILE[name]
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(record(problem="a.x")) + "\n" + line + "\n" + json.dumps(record(problem="b.x")) + "\n")
    records, warnings = read_records([path])
    assert [r["problem"] for r in records] == ["a.x", "b.x"]  # the rest of the file is read
    assert warnings == [f"{path}:2: {reason}"]
    assert "\n" not in warnings[0] and "\x1b" not in warnings[0]


def test_text_is_kept_as_written_and_the_source_is_the_reader_own(tmp_path):
    # Control characters are valid JSON strings: the reader keeps them; every output cleans them.
    rec = record(problem="a\x1b[31m.b\u202e", solution="x" * 100_000, log="\x00\x07\r", _source="forged.jsonl:1")
    path = tmp_path / "r.jsonl"
    path.write_bytes(json.dumps(rec).encode() + b"\n" + json.dumps(record(reason="caf@")).encode().replace(b"@", b"\xff")
                     + b"\n")
    records, warnings = read_records([path])
    assert warnings == [] and records[0]["problem"] == rec["problem"] and len(records[0]["solution"]) == 100_000
    assert [r["_source"] for r in records] == [f"{path}:1", f"{path}:2"]
    assert records[1]["reason"] == "caf\ufffd"  # bytes that are not UTF-8 read as U+FFFD


def test_early_lower_case_status_is_read():
    obj, why = parse_record_line(json.dumps(record(status="incorrect")))
    assert why == "" and obj["status"] == "INCORRECT"


def test_a_record_that_no_longer_validates_is_not_written_and_named_in_one_line(tmp_path):
    from solbench.data.results import append_record_checked

    out = tmp_path / "r.jsonl"
    good = ResultRecord.model_validate(record())
    assert append_record_checked(out, good) is None
    bad = ResultRecord.model_validate(record())
    bad.harness["not_a_phase_s"] = 1.0  # what a hook could add after the record was built
    line = append_record_checked(out, bad)
    assert line is not None and "\n" not in line and "toy.add w cand" in line and "not_a_phase_s" in line
    records, warnings = read_records([out])
    assert len(records) == 1 and warnings == []
