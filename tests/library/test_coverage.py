"""Library-wide coverage (issue 3): enough problems and models, every op family present by tag, one
spelling per model id, folder layout matching names, and the shipped README table up to date.

These read problem files only (no reference runs), so they are fast.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from solbench.data.problem import Problem, find_problems, load_problem
from solbench.engine.problem_code import load_module

ROOT = Path(__file__).resolve().parents[2]
PROBLEMS_DIR = ROOT / "problems"

MIN_PROBLEMS = 40
MIN_MODELS = 12
MIN_BACKWARD = 3
MIN_WORKLOADS = 2
MIN_LAYER_ROLLUPS = 2  # models whose problems cover a full decoder layer
# Families that gather problems from several models (generic training kernels).
MULTI_MODEL_FAMILIES = {"training"}

# The op families of issue 3, as the tags the problem files use.
REQUIRED_TAGS = {
    "gemm", "gemv", "epilogue", "lm_head",                      # GEMMs and their epilogues
    "norm", "rmsnorm", "layernorm", "groupnorm", "residual",    # norms, fused residual add
    "activation", "swiglu", "gelu", "elementwise",              # activations
    "rope", "dit",                                              # LLM and multi-axis DiT RoPE
    "attention", "causal", "decode", "prefill", "mla", "kv_cache",
    "softmax", "embedding", "cross_entropy",
    "moe", "router", "fp8", "quantize", "conv", "ssm",
    "backward", "decoder-layer",
}


@pytest.fixture(scope="module")
def library() -> list[Problem]:
    return [load_problem(f) for f in find_problems(PROBLEMS_DIR)]


def _family(p: Problem) -> str:
    return p.folder.parent.name


def _model_key(model_id: str) -> str:
    """What two spellings of one model share: the name after the org, lower case, letters and digits."""
    return re.sub(r"[^a-z0-9]", "", model_id.rsplit("/", 1)[-1].lower())


def test_enough_problems(library):
    assert len(library) >= MIN_PROBLEMS, f"{len(library)} problems, the issue asks for >= {MIN_PROBLEMS}"


def test_enough_models(library):
    models = {p.source.model for p in library}
    assert len(models) >= MIN_MODELS, f"{len(models)} models ({sorted(models)}), need >= {MIN_MODELS}"


def test_every_op_family_is_present(library):
    tags = {t for p in library for t in p.tags}
    missing = REQUIRED_TAGS - tags
    assert not missing, f"no problem is tagged {sorted(missing)}"


def test_enough_backward_problems(library):
    backward = [p.name for p in library if "backward" in p.tags]
    assert len(backward) >= MIN_BACKWARD, f"backward problems: {backward}"


def test_every_problem_has_several_workloads(library):
    few = [p.name for p in library if len(p.workloads) < MIN_WORKLOADS]
    assert not few, f"fewer than {MIN_WORKLOADS} workloads: {few}"


def test_names_match_folders(library):
    wrong = [f"{p.path}: name {p.name!r}" for p in library
             if p.name != f"{_family(p)}.{p.folder.name}"]
    assert not wrong, "name must be <family folder>.<op folder>:\n" + "\n".join(wrong)


def test_every_problem_ships_eager_and_compile_candidates(library):
    missing = [f"{p.name}: solutions/{c}" for p in library for c in ("torch_eager.py", "torch_compile.py")
               if not (p.folder / "solutions" / c).is_file()]
    assert not missing, "missing shipped candidates:\n" + "\n".join(missing)


def test_one_model_id_per_family(library):
    by_family: dict[str, set[str]] = defaultdict(set)
    for p in library:
        by_family[_family(p)].add(p.source.model)
    mixed = {f: sorted(m) for f, m in by_family.items() if len(m) > 1 and f not in MULTI_MODEL_FAMILIES}
    assert not mixed, f"families naming more than one source.model: {mixed}"


def test_model_ids_spelled_one_way(library):
    spellings: dict[str, set[str]] = defaultdict(set)
    for p in library:
        spellings[_model_key(p.source.model)].add(p.source.model)
    variants = [sorted(s) for s in spellings.values() if len(s) > 1]
    assert not variants, f"one model, several spellings: {variants}"


def test_layer_rollups(library):
    """Problems tagged decoder-layer say how often they run per layer, for enough models."""
    rollup = [p for p in library if "decoder-layer" in p.tags]
    unset = [p.name for p in rollup if p.runs_per_layer is None]
    assert not unset, f"decoder-layer problems without runs_per_layer: {unset}"
    models = {p.source.model for p in rollup}
    assert len(models) >= MIN_LAYER_ROLLUPS, f"full-layer roll-ups for {sorted(models)} only"


def test_readme_table_is_current():
    render = load_module(ROOT / "scripts" / "update_problems_readme.py", "readme").render
    readme = PROBLEMS_DIR / "README.md"
    assert readme.is_file(), "problems/README.md is missing: run python scripts/update_problems_readme.py"
    assert readme.read_text(encoding="utf-8") == render(), (
        "problems/README.md is stale: run python scripts/update_problems_readme.py")
