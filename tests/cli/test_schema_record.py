"""``solbench schema record`` describes the record's parts field by field, nested structures included (no
opaque objects): checked against the part models, which the printed schema must match key for key."""

from __future__ import annotations

import json

from pydantic import BaseModel
from typer.testing import CliRunner

from solbench.cli import app
from solbench.data.record_parts import PARTS, BurstAttempt, OutsideView, TimingDetails


def _object(node: dict, defs: dict) -> dict:
    """The object schema a property holds: through ``$ref``, ``anyOf`` (null aside), ``items``, ``additionalProperties``."""
    while True:
        if "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[-1]]
        elif "anyOf" in node:
            node = next(a for a in node["anyOf"] if a.get("type") != "null")
        elif node.get("type") == "array":
            node = node["items"]
        elif node.get("type") == "object" and "properties" not in node and isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return node


def _walk(schema: dict, path: list[str]) -> dict:
    node = schema
    for key in path:
        node = _object(node["properties"][key], schema.get("$defs", {}))
    return node


def test_the_printed_schema_describes_every_part_and_nested_structure_field_by_field():
    r = CliRunner().invoke(app, ["schema", "record"])
    assert r.exit_code == 0, r.output
    schema = json.loads(r.stdout)
    expected: dict[tuple[str, ...], type[BaseModel]] = {(part,): model for part, model in PARTS.items()}
    expected |= {("timing", "details"): TimingDetails, ("correctness", "burst", "attempts"): BurstAttempt,
                 ("correctness", "burst", "attempts", "outside"): OutsideView}
    for path, model in expected.items():
        node = _walk(schema, list(path))
        assert set(node["properties"]) == set(model.model_fields), path
        assert node.get("additionalProperties") is False, path
        undocumented = [k for k, v in node["properties"].items() if not v.get("description")]
        assert not undocumented, (path, undocumented)
    rounds = _walk(schema, ["correctness", "rounds", "outputs"])  # per output name: a comparison, not a bag
    assert {"max_abs_err", "mismatch_ratio", "first_bad_index"} <= set(rounds["properties"])
    assert {"cases_s", "verdict_s", "wall_s", "transport"} <= set(schema["properties"]["harness"]["properties"])
