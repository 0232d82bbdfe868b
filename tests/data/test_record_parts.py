"""The record's parts are typed: every committed results file still reads (records of every version), a part's
known key of the wrong type is refused, and the JSON Schema describes each part field by field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from solbench.data.record import PARTS, RECORD_VERSION, ResultRecord, upgrade
from solbench.data.results import parse_record_line, read_records

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = sorted(p for p in [*ROOT.glob("results/**/*.jsonl"), *ROOT.glob("tests/fixtures/**/*.jsonl")]
                   if '"problem"' in p.read_text(errors="replace") and '"status"' in p.read_text(errors="replace"))


def test_there_are_committed_records_to_read():
    assert len(COMMITTED) >= 5


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_committed_results_file_reads(path):
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    records, warnings = read_records([path])
    assert not warnings and len(records) == len(lines), warnings[:3]
    for r in records:  # as read: upgraded, plus where it came from (``_source``)
        ResultRecord.model_validate({k: v for k, v in r.items() if k != "_source"})


def test_a_record_without_a_version_is_read_as_the_first_one():
    line = json.loads(next(ln for p in COMMITTED for ln in p.read_text().splitlines() if ln.strip()))
    old = {k: v for k, v in line.items() if k != "record_version"} | {"status": line["status"].lower()}
    assert upgrade(old)["status"] == line["status"] and upgrade(old)["record_version"] == 1
    obj, why = parse_record_line(json.dumps(old))
    assert obj is not None and obj["status"] == line["status"], why


@pytest.mark.parametrize("part, key, bad", [
    ("timing", "median_s", "fast"), ("timing", "samples_s", 3), ("correctness", "passed", "maybe"),
    ("telemetry", "samples", "many"), ("environment", "sm_count", "lots"), ("harness", "wall_s", [1]),
])
def test_a_known_key_of_the_wrong_type_is_refused(part, key, bad):
    line = json.loads(next(ln for p in COMMITTED for ln in p.read_text().splitlines() if ln.strip()))
    good = ResultRecord.model_validate(line)
    with pytest.raises(ValidationError, match=part):
        ResultRecord.model_validate(good.model_dump() | {part: {**getattr(good, part), key: bad}})


def test_the_schema_describes_each_part_field_by_field():
    props = ResultRecord.model_json_schema()["properties"]
    for part, model in PARTS.items():
        assert set(props[part]["properties"]) == set(model.model_fields), part
    assert "edge" in props["correctness"]["properties"] and "$ref" not in json.dumps(props["correctness"])


def _first_record() -> dict:
    return json.loads(next(ln for p in COMMITTED for ln in p.read_text().splitlines() if ln.strip()))


def test_an_unknown_top_level_key_is_refused_but_a_newer_version_loads_with_it():
    line = _first_record()
    with pytest.raises(ValidationError, match="surprise"):
        ResultRecord.model_validate(line | {"surprise": 1})
    obj, why = parse_record_line(json.dumps(line | {"surprise": 1}))
    assert obj is None and "surprise" in why
    newer = line | {"surprise": 1, "record_version": RECORD_VERSION + 1}
    obj, why = parse_record_line(json.dumps(newer))
    assert obj is not None and obj["surprise"] == 1, why  # kept for the frame, not checked


def test_every_phase_the_ledger_writes_is_a_typed_harness_key():
    from solbench.data.record import Harness
    from solbench.engine.ledger import PHASES

    assert set(PHASES) <= set(Harness.model_fields)
