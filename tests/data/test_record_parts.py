"""The record's parts are typed: every committed results file still reads (records of every version, through
the versioned reader), an undeclared key is refused at any depth, a known key of the wrong type is refused,
a record is checked against its status, and the JSON Schema describes each part field by field."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from solbench.data.record import RECORD_VERSION, ResultRecord, read_record, upgrade
from solbench.data.record_parts import HARNESS_PHASES, PARTS, Harness, HarnessPhases
from solbench.data.results import parse_record_line, read_records

ROOT = Path(__file__).resolve().parents[2]


def _records_in(obj: object) -> bool:
    """Whether a JSON document is, or holds at its top level, result records (a record's required keys)."""
    items = obj if isinstance(obj, list) else list(obj.values()) if isinstance(obj, dict) else []
    return _is_record(obj) or any(_is_record(x) or (isinstance(x, list) and any(map(_is_record, x))) for x in items)


def _is_record(x: object) -> bool:
    required = {k for k, f in ResultRecord.model_fields.items() if f.is_required()}
    return isinstance(x, dict) and required <= set(x)


def _text(p: Path) -> str:
    return gzip.decompress(p.read_bytes()).decode(errors="replace") if p.name.endswith(".gz") else p.read_text(
        errors="replace")


COMMITTED = sorted(p for p in [*ROOT.glob("results/**/*.jsonl"), *ROOT.glob("results/**/*.jsonl.gz"),
                               *ROOT.glob("tests/fixtures/**/*.jsonl")]
                   if '"problem"' in _text(p) and '"status"' in _text(p))
COMMITTED_JSON = sorted(p for p in ROOT.glob("results/**/*.json") if _records_in(json.loads(p.read_text())))


def test_there_are_committed_records_to_read():
    assert len(COMMITTED) >= 5
    assert sum(len(_text(p).splitlines()) for p in COMMITTED) >= 500


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_committed_results_file_reads(path):
    lines = [ln for ln in _text(path).splitlines() if ln.strip()]
    records, warnings = read_records([path])
    assert not warnings and len(records) == len(lines), warnings[:3]
    for r in records:  # as read: upgraded, plus where it came from (``_source``)
        assert r["record_version"] == RECORD_VERSION
        ResultRecord.model_validate({k: v for k, v in r.items() if k != "_source"})


def test_committed_json_files_holding_records_read_too():
    """A .json results file that holds whole records (none does today: they hold summaries of runs) reads
    through the same reader, record by record."""
    for path in COMMITTED_JSON:
        doc = json.loads(path.read_text())
        found = [doc] if _is_record(doc) else [x for v in (doc if isinstance(doc, list) else doc.values())
                                                 for x in (v if isinstance(v, list) else [v]) if _is_record(x)]
        for rec in found:
            obj, why = parse_record_line(json.dumps(rec))
            assert obj is not None, f"{path}: {why}"


def _first_record() -> dict:
    return json.loads(next(ln for p in COMMITTED for ln in _text(p).splitlines() if ln.strip()))


def _record_with(path: str, value: object) -> dict:
    """The first committed record (upgraded) with ``value`` set at the dotted ``path`` (lists by index)."""
    rec = copy.deepcopy(upgrade(_first_record()))
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    node = rec
    for p in parents:
        node = node[p] if isinstance(node, list) or p in node else node.setdefault(p, {})
    node[last] = value
    return rec


def test_a_record_without_a_version_is_read_as_the_first_one():
    line = _first_record()
    old = {k: v for k, v in line.items() if k != "record_version"} | {"status": line["status"].lower()}
    assert upgrade(old)["status"] == line["status"] and upgrade(old)["record_version"] == RECORD_VERSION
    obj, why = parse_record_line(json.dumps(old))
    assert obj is not None and obj["status"] == line["status"], why


def test_a_version_1_record_is_upgraded_not_accepted_as_it_is():
    """v1's ``timed.sets_checked`` is v2's ``outputs_checked``: the reader renames it; the model refuses it."""
    v1 = _record_with("correctness.timed", {"sets": 2, "sets_checked": 2, "passed": True}) | {"record_version": 1}
    with pytest.raises(ValidationError, match="sets_checked"):
        ResultRecord.model_validate(v1 | {"record_version": RECORD_VERSION})
    obj, why = parse_record_line(json.dumps(v1))
    assert obj is not None, why
    assert obj["correctness"]["timed"] == {"sets": 2, "outputs_checked": 2, "passed": True}
    assert v1["correctness"]["timed"]["sets_checked"] == 2  # the caller's dict is left as it was
    assert read_record(v1).correctness["timed"]["outputs_checked"] == 2  # a dict from elsewhere (a server's)


@pytest.mark.parametrize("part, key, bad", [
    ("timing", "median_s", "fast"), ("timing", "samples_s", 3), ("correctness", "passed", "maybe"),
    ("telemetry", "samples", "many"), ("environment", "sm_count", "lots"), ("harness", "wall_s", [1]),
])
def test_a_known_key_of_the_wrong_type_is_refused(part, key, bad):
    good = ResultRecord.model_validate(upgrade(_first_record()))
    with pytest.raises(ValidationError, match=part):
        ResultRecord.model_validate(good.model_dump() | {part: {**getattr(good, part), key: bad}})


@pytest.mark.parametrize("path", [
    "timing.surprise", "timing.details.surprise", "timing.cupti.surprise", "timing.clock.surprise",
    "correctness.surprise", "correctness.rounds.0.surprise", "correctness.rounds.0.outputs.out.surprise",
    "correctness.timed.surprise", "correctness.edge.surprise", "correctness.burst.surprise",
    "telemetry.surprise", "environment.surprise", "harness.surprise",
])
def test_an_undeclared_key_is_refused_at_any_depth(path):
    rec = _record_with(path, 1)
    if path.startswith("correctness.edge"):
        rec["correctness"]["edge"] = {"run": [], "skipped": [], "failed": [], "surprise": 1}
    if path.startswith("correctness.burst"):
        rec["correctness"]["burst"] = {"claimed_s": 1e-3, "attempts": [], "passed": True, "surprise": 1}
    with pytest.raises(ValidationError) as err:
        ResultRecord.model_validate(rec)
    (e,) = err.value.errors()
    assert e["type"] == "extra_forbidden" and e["loc"][-1] == "surprise" and e["loc"][0] == path.split(".")[0]
    obj, why = parse_record_line(json.dumps(rec))
    assert obj is None and "surprise" in why and why.startswith("not a valid record")


def test_a_burst_as_the_engine_writes_it_is_declared_and_its_outside_view_checked():
    attempt = {"calls": 400, "wall_s": 0.06, "rtt_s": 1e-4, "overhead_s": 2e-5, "overhead_share": 0.13,
               "outside_share": 0.02, "per_call_s": 1.3e-4, "ratio": 0.9, "min_ratio": 0.25, "conclusive": True,
               "ok": True, "edited_calls": 400, "checked_calls": [3, 77, 200, 391],
               "outside": {"wall_s": 0.06, "worker_cpu_s": 0.05, "worker_wait_s": 0.0, "other_cpu_s": 0.0,
                           "other_pids": [], "cores": 2, "outside_cpu_s": 0.002}}
    burst = {"claimed_s": 1.2e-4, "attempts": [attempt], "passed": True}
    ResultRecord.model_validate(_record_with("correctness.burst", burst))
    attempt["outside"]["cores"] = "two"
    with pytest.raises(ValidationError, match="cores"):
        ResultRecord.model_validate(_record_with("correctness.burst", burst))


def test_an_unknown_key_of_a_newer_version_is_kept_unchecked_at_any_depth():
    line = upgrade(_first_record())
    with pytest.raises(ValidationError, match="surprise"):
        ResultRecord.model_validate(line | {"surprise": 1})
    obj, why = parse_record_line(json.dumps(line | {"surprise": 1}))
    assert obj is None and "surprise" in why
    newer = _record_with("timing.details.surprise", 2) | {"surprise": 1, "record_version": RECORD_VERSION + 1}
    obj, why = parse_record_line(json.dumps(newer))
    assert obj is not None and obj["surprise"] == 1 and obj["timing"]["details"]["surprise"] == 2, why
    wrong = newer | {"timing": {**newer["timing"], "median_s": "fast"}}  # a known key is still checked
    obj, why = parse_record_line(json.dumps(wrong))
    assert obj is None and "median_s" in why


def _passed() -> dict:
    return upgrade(_first_record())


@pytest.mark.parametrize("change, message", [
    ({"time_s": None}, "PASSED record needs time_s and sol"),
    ({"sol": None}, "PASSED record needs time_s and sol"),
    ({"reason": "slow"}, "PASSED record has no reason"),
    ({"status": "INCORRECT"}, "status INCORRECT: time_s and sol must be null"),
    ({"status": "TIMEOUT", "time_s": None, "sol": None}, "status TIMEOUT needs a reason"),
    ({"status": "REWARD_HACK", "time_s": None, "sol": None, "reason": ""}, "status REWARD_HACK needs a reason"),
])
def test_a_record_is_checked_against_its_status(change, message):
    assert _passed()["status"] == "PASSED"
    ResultRecord.model_validate(_passed())
    with pytest.raises(ValidationError, match=message):
        ResultRecord.model_validate(_passed() | change)
    ResultRecord.model_validate(_passed() | {"status": "TIMEOUT", "time_s": None, "sol": None, "reason": "ran out"})


def test_a_passed_record_carries_its_timings_median_and_no_failed_check():
    rec = _passed()
    assert rec["timing"]["median_s"] == rec["time_s"]
    with pytest.raises(ValidationError, match="time_s .* is its timing.median_s"):
        ResultRecord.model_validate(rec | {"time_s": rec["time_s"] * 2, "sol": rec["sol"] / 2})
    with pytest.raises(ValidationError, match="correctness.passed false"):
        ResultRecord.model_validate(rec | {"correctness": {**rec["correctness"], "passed": False}})


def _nested_models(model: type[BaseModel]) -> list[type[BaseModel]]:
    """``model`` and every model its fields hold, at any depth."""
    seen: list[type[BaseModel]] = []
    todo = [model]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.append(m)
        for f in m.model_fields.values():
            todo += [a for a in _args(f.annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
    return seen


def _args(tp: object) -> list[object]:
    args = list(getattr(tp, "__args__", ()) or ())
    return [tp, *[x for a in args for x in _args(a)]]


def test_every_part_model_refuses_undeclared_keys_and_documents_its_fields():
    from solbench.data.profile import Profile

    for model in [m for part in [*PARTS.values(), Profile] for m in _nested_models(part)]:
        assert model.model_config.get("extra") == "forbid", model.__name__
        undocumented = [n for n, f in model.model_fields.items() if not f.description]
        assert not undocumented, (model.__name__, undocumented)


def test_the_schema_describes_each_part_field_by_field_nested_models_included():
    props = ResultRecord.model_json_schema()["properties"]
    for part, model in PARTS.items():
        assert set(props[part]["properties"]) == set(model.model_fields), part
        assert props[part]["additionalProperties"] is False, part
    assert "$ref" not in json.dumps({part: props[part] for part in PARTS})  # each part whole, nested models inlined
    correctness = props["correctness"]["properties"]
    burst = next(a for a in correctness["burst"]["anyOf"] if a.get("type") == "object")
    attempt = burst["properties"]["attempts"]["items"]
    assert {"outside_share", "outside", "ratio", "checked_calls"} <= set(attempt["properties"])
    outside = next(a for a in attempt["properties"]["outside"]["anyOf"] if a.get("type") == "object")
    assert {"cores", "outside_cpu_s", "nvml"} <= set(outside["properties"])
    details = next(a for a in props["timing"]["properties"]["details"]["anyOf"] if a.get("type") == "object")
    assert "graph_calls_per_replay" in details["properties"]


def test_the_harness_phases_have_one_owner():
    from solbench.engine import ledger

    assert ledger.PHASES is HARNESS_PHASES
    assert set(HARNESS_PHASES) == set(HarnessPhases.model_fields) and issubclass(Harness, HarnessPhases)
    assert not hasattr(ledger, "HarnessPhases")
    with pytest.raises(ValueError, match="not a harness phase"):
        ledger.Ledger().add("made_up_s", 1.0)


def test_the_cost_and_git_details_are_typed_too_and_may_be_null():
    records = [upgrade(json.loads(ln)) for p in COMMITTED for ln in _text(p).splitlines() if ln.strip()]
    cost = next(r["cost"] for r in records if r.get("cost"))
    rec = next(r for r in records if r.get("git")) | {"cost": cost}  # as the engine writes both
    ResultRecord.model_validate(rec)
    ResultRecord.model_validate(rec | {"cost": None, "git": None})
    for key in ("cost", "git"):
        with pytest.raises(ValidationError, match=rf"{key}\.surprise"):
            ResultRecord.model_validate(rec | {key: {**rec[key], "surprise": 1}})
    with pytest.raises(ValidationError, match="cost.flops_min"):
        ResultRecord.model_validate(rec | {"cost": {k: v for k, v in rec["cost"].items() if k != "flops_min"}})
