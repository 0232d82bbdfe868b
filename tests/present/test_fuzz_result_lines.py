"""Fuzzing result lines through every reader and renderer: hostile lines never raise, valid records are kept.

Generated lines (hypothesis): arbitrary JSON values, records with a field of the wrong type, nesting
from 30 to 100,000 levels, integers of up to 6,000 digits, non-finite and huge floats, bytes that are
not UTF-8, text with control characters, terminal escape sequences, lone surrogates, markup and
very long strings. They go through ``read_records``, ``load_results``, the leaderboard and its
terminal, markdown, CSV, JSON and HTML renderers, and the report (no charts); every valid record
must come out the other end or be named in a warning, and no output may carry a control character.

The budget is fixed (examples per test below, no deadline, derandomised, no example database), about
15 s on 2 cores; ``SOLBENCH_FUZZ_SCALE=10`` runs ten times as many examples.
"""

from __future__ import annotations

import io
import json
import os
import re
import tempfile
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from solbench.data.record import RECORD_VERSION, Status
from solbench.data.results import read_records
from solbench.errors import SolbenchError
from solbench.present.frame import MAX_MAGNITUDE, MAX_SOL, load_results
from solbench.present.leaderboard import print_leaderboard, to_csv, to_html, to_json, to_markdown
from solbench.present.ranking import leaderboard
from solbench.present.report import build_report

SCALE = int(os.environ.get("SOLBENCH_FUZZ_SCALE", "1"))


def budget(examples: int) -> settings:
    return settings(max_examples=examples * SCALE, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


NASTY = ["\x1b[2J\x1b[31m", "\x1b]0;pwned\x07", "\x9b31m", "\u202e", "\x00", "\r", "\ud800", "\t", "\n",
         "=cmd|' /C calc'!A0", "<script>alert(1)</script>", "$\\frac{1}{0}$", "|", "[bold red]x[/]", "{{ 7*7 }}",
         "x" * 20_000]
any_char = st.characters(exclude_categories=())  # surrogates and control characters included
nasty_text = st.one_of(st.text(any_char, max_size=30), st.sampled_from(NASTY),
                       st.lists(st.sampled_from(NASTY) | st.text(any_char, max_size=5), max_size=4).map("".join))
key_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)  # a JSON key Python can encode
int64 = st.integers(-(2**63), 2**63 - 1)
floats = st.floats(allow_nan=True, allow_infinity=True)


def json_values(ints: st.SearchStrategy[int] = st.integers(), text: st.SearchStrategy[str] = nasty_text):
    leaves = st.none() | st.booleans() | ints | floats | text
    return st.recursive(leaves, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(key_text, kids, max_size=4),
                        max_leaves=12)


def huge_int(digits: int) -> str:
    return "9" * digits


plain_values = json_values(int64, st.text(any_char, max_size=20))  # what a record may nest: 64-bit integers


@st.composite
def valid_record(draw, run: int) -> dict:
    """A record every reader must keep: schema-valid (record v2: the reason and time its status asks for,
    the parts' declared keys only), plausible numbers, nasty text anywhere text goes; a newer version's
    record may carry keys this version does not know (they are set aside, the record kept)."""
    status = draw(st.sampled_from([s.value for s in Status]))
    passed = status == Status.PASSED.value
    time_s = draw(st.floats(1e-9, 1e3)) if passed else None
    rec = {
        "problem": draw(nasty_text), "workload": draw(nasty_text), "solution": draw(nasty_text), "status": status,
        "device": draw(nasty_text), "gpu_spec": draw(st.sampled_from(["h200_sxm", "cpu_estimate", "h200_sxm_measured"])
                                                     | nasty_text | st.none()),
        "time_s": time_s,
        "sol": draw(st.floats(1e-6, MAX_SOL)) if passed else None,
        "flops": draw(st.integers(0, 2**62)), "bytes": draw(st.integers(0, 2**62)),
        "t_ideal_s": draw(st.floats(0, 1e3)), "bound": draw(nasty_text), "timestamp": draw(nasty_text),
        "solbench_version": draw(nasty_text), "run_id": f"run-{run}",
        "roof": draw(st.sampled_from(["datasheet", "measured", "estimate"]) | nasty_text),
        "tags": draw(st.lists(nasty_text, max_size=3)), "flags": draw(st.lists(nasty_text, max_size=3)),
        "axes": draw(st.dictionaries(key_text, int64, max_size=3)),
        "timing": {"method": draw(nasty_text | st.none()), **({"median_s": time_s} if passed else {})},
        "environment": {"hostname": draw(nasty_text), "platform": draw(nasty_text | st.none()),
                        "cpu_count": draw(st.none() | int64)},
        "reason": None if passed else draw(nasty_text.filter(bool)), "log": draw(nasty_text),
        "arithmetic_intensity": draw(st.none() | st.floats(0, MAX_MAGNITUDE / 1e12)),
    }
    extra = draw(st.dictionaries(key_text.filter(lambda k: k not in rec), plain_values, max_size=2))
    if extra:
        rec["record_version"] = RECORD_VERSION + 1
    return {**rec, **extra}


def hostile_line(draw) -> bytes:
    kind = draw(st.sampled_from(["json", "wrong_field", "deep", "huge_int", "text", "bytes", "raw_text_record"]))
    if kind == "json":
        return json.dumps(draw(json_values())).encode("utf-8", "surrogatepass")
    if kind in ("wrong_field", "raw_text_record"):
        rec = draw(valid_record(run=-1))
        if kind == "wrong_field":
            rec[draw(st.sampled_from(sorted(rec)))] = draw(json_values())
            return json.dumps(rec).encode()
        # Raw (unescaped) text: control characters make it invalid JSON, surrogates invalid UTF-8.
        return json.dumps(rec, ensure_ascii=False).encode("utf-8", "surrogatepass")
    if kind == "deep":
        n = draw(st.sampled_from([31, 32, 33, 200, 999, 5_000, 100_000]))
        inner = draw(st.sampled_from(["[", '{"a":']))
        close = "]" if inner == "[" else "}"
        return (json.dumps({"problem": "p", "status": "PASSED"})[:-1] + ', "x": ' + inner * n + "0" + close * n + "}"
                ).encode()
    if kind == "huge_int":
        rec = draw(valid_record(run=-1))
        field = draw(st.sampled_from(["flops", "bytes", "extra"]))
        return (json.dumps(rec)[:-1] + f', "{field}": ' + huge_int(draw(st.sampled_from([19, 20, 400, 4301, 6000])))
                + "}").encode()
    if kind == "text":
        return draw(st.text(any_char, max_size=200)).encode("utf-8", "surrogatepass")
    return draw(st.binary(max_size=200))


@st.composite
def result_file(draw) -> tuple[bytes, list[dict]]:
    """File content mixing hostile lines and valid records, and the valid records in it."""
    lines: list[bytes] = []
    valid: list[dict] = []
    for i in range(draw(st.integers(0, 12))):
        if draw(st.booleans()):
            rec = draw(valid_record(run=i))
            valid.append(rec)
            lines.append(json.dumps(rec).encode())  # ensure_ascii: escapes keep it one valid line
        else:
            lines.append(hostile_line(draw).replace(b"\n", b" ").replace(b"\r", b" "))
    return b"\n".join(lines) + b"\n", valid


CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _clean(text: str, where: str, tabs: bool = False) -> None:
    """No control character (other than newlines) and nothing that cannot be written as UTF-8."""
    text.encode("utf-8")  # a lone surrogate raises here
    bad = [c for c in text if unicodedata.category(c)[0] == "C" and c not in ("\n\t" if tabs else "\n")]
    assert not bad, f"{where}: {[hex(ord(c)) for c in bad[:5]]}"


def _left_out_count(notes: list[str]) -> int:
    return sum(int(m.group(1)) for n in notes if (m := re.search(r": (\d+) record\(s\) against the ", n)))


def _render_everything(df) -> None:
    try:
        lb = leaderboard(df)
    except SolbenchError:
        assert df.empty  # "no result records found": a clean one-line error
        return
    # Never dropped silently: every record in the frame is ranked or counted in a note.
    assert len(lb.records) + _left_out_count(lb.left_out) == len(df)
    buf = io.StringIO()
    print_leaderboard(lb, Console(file=buf, width=100, color_system=None))
    _clean(buf.getvalue(), "terminal")
    _clean(to_markdown(lb), "markdown")
    _clean(to_csv(lb), "csv")
    json.loads(to_json(lb))
    _clean(to_html(lb), "html")
    _clean(build_report(df, charts="none"), "report", tabs=True)  # a log keeps its tabs in <pre>


@budget(150)
@given(st.data())
def test_read_records_never_raises_on_any_line(data):
    line = hostile_line(data.draw)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.jsonl"
        path.write_bytes(line + b"\n")
        _, warnings = read_records([path])
    for w in warnings:
        assert re.match(rf"{re.escape(str(path))}:\d+: ", w) and "\n" not in w


@budget(40)
@given(result_file())
def test_every_reader_and_renderer_survives_and_keeps_valid_records(content):
    data, valid = content
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "results.jsonl"
        path.write_bytes(data)
        records, _ = read_records([path])
        df = load_results(path, warn=False)
    kept = {r["run_id"] for r in records}
    assert {r["run_id"] for r in valid} <= kept, "a valid record was not read"
    assert {r["run_id"] for r in valid} <= set(df["run_id"]), "a valid record was left out of the frame"
    for w in df.attrs["warnings"]:
        assert "\n" not in w and w.startswith(str(path))
    _render_everything(df)


@budget(12)
@given(st.lists(valid_record(run=0), min_size=1, max_size=6))
def test_valid_records_alone_give_no_warning(recs):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "results.jsonl"
        path.write_text("".join(json.dumps({**r, "run_id": f"run-{i}"}) + "\n" for i, r in enumerate(recs)))
        df = load_results(path, warn=False)
    assert df.attrs["warnings"] == [] and len(df) == len(recs)
    _render_everything(df)


@pytest.mark.parametrize("value", ["1" * 5001, "[" * 100_000 + "]" * 100_000, "1e308", "-1", "NaN", "Infinity"],
                         ids=["5001 digits", "100000 deep", "1e308", "negative", "NaN", "Infinity"])
def test_the_issue_cases_as_sol(tmp_path, value):
    """The cases of issue 14, fixed (hypothesis finds their neighbours above)."""
    rec = {"problem": "a.b", "workload": "w", "solution": "s", "status": "PASSED", "device": "d", "gpu_spec": "x",
           "time_s": 1e-3, "sol": 0.5, "flops": 1, "bytes": 1, "t_ideal_s": 5e-4, "bound": "memory",
           "timestamp": "t", "solbench_version": "0", "run_id": "ok"}
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(rec) + "\n" + json.dumps({**rec, "run_id": "bad"})[:-1].replace('"sol": 0.5',
                                                                                                f'"sol": {value}') + "}\n")
    df = load_results(path, warn=False)
    assert list(df["run_id"]) == ["ok"] and len(df.attrs["warnings"]) == 1
    assert df.attrs["warnings"][0].startswith(f"{path}:2: ")
    _render_everything(df)
