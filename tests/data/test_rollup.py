"""solbench.data.rollup on small synthetic problems: axis binding per scenario, phase selection, runs,
errors, and the markdown blocks (render, update, check; the command is scripts/render_model_layers.py)."""

from __future__ import annotations

import pytest
import yaml

from solbench.data.hardware import load_spec
from solbench.data.problem import load_problem
from solbench.data.rollup import RollupError, model_rollup, render_markdown, scenario, update_markdown
from solbench.errors import SolbenchError


def _write(root, op, axes, inputs, flops, tags, runs=1, bytes_="auto"):
    folder = root / "toy" / op
    folder.mkdir(parents=True)
    (folder / "reference.py").write_text(f"def run({', '.join(inputs)}):\n    return {next(iter(inputs))}\n")
    first = next(iter(inputs.values()))
    doc = {"name": f"toy.{op}", "description": op, "source": {"model": "org/Toy-1B"}, "tags": tags,
           "runs_per_layer": runs, "axes": axes,
           "inputs": {n: {"shape": s, "dtype": "bfloat16"} for n, s in inputs.items()},
           "outputs": {"out": {"shape": first, "dtype": "bfloat16"}}, "reference": "reference.py:run",
           "flops": flops, "bytes": bytes_, "compute_dtype": "bfloat16", "tolerance": {"atol": 0.01, "rtol": 0.01},
           "workloads": [{"name": "w", "axes": {a: 2 for a, v in axes.items() if v["type"] == "var"}}]}
    (folder / "problem.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_problem(folder)


@pytest.fixture()
def toy(tmp_path):
    var, h = {"type": "var"}, {"type": "const", "value": 64}
    return [
        _write(tmp_path, "norm", {"T": var, "H": h}, {"x": ["T", "H"]}, "4 * T * H", ["norm", "decoder-layer"], runs=2),
        _write(tmp_path, "proj", {"T": var, "H": h}, {"x": ["T", "H"], "w": ["H", "H"]}, "2 * T * H * H",
               ["gemm", "decoder-layer"]),
        _write(tmp_path, "attn_decode", {"B": var, "L": var}, {"q": ["B", 4], "k": ["B", "L", 4]}, "B * L",
               ["attention", "decode", "decoder-layer"]),
        _write(tmp_path, "attn_prefill", {"B": var, "S": var}, {"q": ["B", "S", 4]}, "B * S * S",
               ["attention", "prefill", "decoder-layer"]),
        _write(tmp_path, "append", {"B": var, "L": var}, {"k": ["B", "L"]}, "0", ["kv_cache", "decoder-layer"],
               bytes_="B * 10"),
        _write(tmp_path, "lm_head", {"T": var, "H": h}, {"x": ["T", "H"]}, "T", ["gemm"]),  # not in the layer
    ]


def test_decode_binds_batch_and_context(toy):
    df = model_rollup(toy, "toy", 3, phase="decode", context=100).set_index("op")
    assert list(df.index) == ["append", "attn_decode", "norm", "proj"]  # prefill-only and non-layer ops left out
    assert df.loc["attn_decode", "flops"] == 3 * 100
    assert df.loc["norm", "flops"] == 2 * 4 * 3 * 64  # runs_per_layer multiplies
    assert df.loc["append", "bytes"] == 3 * 10
    assert df.attrs["scenario"] == "decode_b3_kv100"


def test_prefill_binds_sequences_and_per_token_rows(toy):
    df = model_rollup(toy, "org/Toy-1B", 12, phase="prefill", batch=3).set_index("op")
    assert list(df.index) == ["append", "attn_prefill", "norm", "proj"]
    assert df.loc["attn_prefill", "flops"] == 3 * 4 * 4  # B=3 prompts of S=4
    assert df.loc["append", "bytes"] == 12 * 10  # no S axis: one row per token
    assert df.loc["proj", "flops"] == 2 * 12 * 64 * 64


def test_roofline_columns_follow_the_spec(toy):
    spec = load_spec("h200_sxm")
    df = model_rollup(toy, "toy", 4096, spec=spec, order=["proj", "norm"])
    assert list(df["op"][:2]) == ["proj", "norm"]
    row = df.iloc[0]
    assert row["t_ideal_s"] == pytest.approx(max(row["flops"] / spec.peak("bfloat16"),
                                                 row["bytes"] / spec.memory_bandwidth))
    assert df["time_share"].sum() == pytest.approx(1.0)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"tokens": 2, "phase": "decode"}, "needs context"),
    ({"tokens": 2, "phase": "decode", "batch": 1, "context": 8}, "one token per sequence"),
    ({"tokens": 10, "phase": "prefill", "batch": 3}, "multiple of batch"),
    ({"tokens": 0}, "at least 1"),
    ({"tokens": 4, "phase": "train"}, "'decode' or 'prefill'"),
])
def test_bad_scenarios_raise_one_clear_error(kwargs, message):
    with pytest.raises(RollupError, match=message):
        scenario(**kwargs)


def test_unknown_model_and_unbindable_axes(toy, tmp_path):
    with pytest.raises(RollupError, match="no problem of model 'nope'"):
        model_rollup(toy, "nope", 4)
    odd = _write(tmp_path / "x", "odd", {"E": {"type": "var"}}, {"x": ["E"]}, "E", ["decoder-layer"])
    with pytest.raises(RollupError, match=r"cannot bind var axes \['E'\]"):
        model_rollup([odd], "toy", 4)
    assert issubclass(RollupError, SolbenchError)


def test_markdown_blocks_render_update_and_check(toy, tmp_path):
    doc = tmp_path / "layers.md"
    doc.write_text("# T\n<!-- rollup model=toy tokens=2 phase=decode context=8 -->\nold\n<!-- /rollup -->\ntail\n")
    assert update_markdown(doc, toy, check=True) is True
    assert "old" in doc.read_text()  # check mode writes nothing
    assert update_markdown(doc, toy) is True
    text = doc.read_text()
    assert "| proj | `toy.proj` | 1 |" in text and text.endswith("<!-- /rollup -->\ntail\n")
    assert render_markdown(text, toy) == text  # idempotent
    assert update_markdown(doc, toy) is False
    bad = tmp_path / "bad.md"
    bad.write_text("<!-- rollup tokens=2 -->\n<!-- /rollup -->\n")
    with pytest.raises(RollupError, match="needs model="):
        update_markdown(bad, tmp_path)
    with pytest.raises(RollupError, match="not found"):
        update_markdown(tmp_path / "missing.md", tmp_path)
