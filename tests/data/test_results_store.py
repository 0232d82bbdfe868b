"""The results store loses nothing under concurrent writers and survives torn lines."""

import json
import multiprocessing as mp

from solbench.data.results import append_records, read_records


def _writer(path: str, who: int, n: int) -> None:
    for i in range(n):
        append_records(path, [{"problem": "p", "status": "PASSED", "who": who, "i": i, "pad": "x" * 5000}])


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
    assert sorted((r["who"], r["i"]) for r in records) == [(w, i) for w in range(4) for i in range(40)]


def test_torn_line_is_skipped_and_next_append_starts_clean(tmp_path):
    path = tmp_path / "r.jsonl"
    append_records(path, [{"problem": "a", "status": "PASSED"}])
    with open(path, "a") as fh:
        fh.write('{"problem": "torn", "sta')  # a writer killed mid-line
    append_records(path, [{"problem": "b", "status": "INCORRECT"}])
    records, warnings = read_records([path])
    assert [r["problem"] for r in records] == ["a", "b"]
    assert len(warnings) == 1 and "unreadable line skipped" in warnings[0]
    assert all(json.loads(line) for line in path.read_text().splitlines()[-1:])


def test_folders_and_missing_paths(tmp_path):
    append_records(tmp_path / "sub" / "x.jsonl", [{"problem": "a", "status": "PASSED"}])
    records, warnings = read_records([tmp_path, tmp_path / "missing.jsonl"])
    assert len(records) == 1 and "no such file" in warnings[0]
