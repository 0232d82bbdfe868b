"""Run options: declared once (the CLI's defaults are the model's), validated once, one line per mistake."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer.main

import solbench
from solbench.cli import app
from solbench.engine.options import RunOptions, resolve_options, timing_config
from solbench.errors import SolbenchError

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny"

def test_cli_defaults_are_the_models():
    """Every field is a `solbench run` option of the same name, with the model's default (None where computed)."""
    command = typer.main.get_command(app).commands["run"]
    params = {p.name: p for p in command.params}
    for name, field in RunOptions.model_fields.items():
        want = None if field.default_factory is not None or isinstance(field.default, tuple) else field.default
        assert params[name].default == want, name
    assert "--no-guards" in params["guards"].secondary_opts and "--timeout" in params["timeout_s"].opts


def test_keyword_settings_go_on_top_of_options():
    base = RunOptions(device="cpu", seed=5)
    merged = resolve_options(base, budget_s=0.2, gpu=None)  # None: not given
    assert (merged.device, merged.seed, merged.budget_s, merged.gpu) == ("cpu", 5, 0.2, None)
    assert resolve_options(base) is base and resolve_options().rounds == 3
    with pytest.raises(Exception):  # noqa: B017 - frozen: a changed copy goes through validation
        base.budget_s = -1  # type: ignore[misc]


@pytest.mark.parametrize("settings, fragment", [
    ({"rounds": 2}, "--rounds 2: at least 3"),
    ({"budget_s": 0}, "budget must be a positive number of seconds"),
    ({"workers_ahead": -1}, "--workers-ahead must be 0 or more"),
    ({"device": "tpu"}, "device 'tpu': use cpu, cuda or cuda:N"),
    ({"timing_method": "magic"}, "timing method 'magic': use one of"),
    ({"timing_method": "events"}, "needs --device cuda"),
    ({"interleave": -1}, "--interleave -1"),
    ({"cooldown_max_s": -1}, "--cooldown -1"),
    ({"budget": 1}, "unknown run setting 'budget': use one of device, gpu"),
    ({"timeout_s": "soon"}, "run setting timeout_s: Input should be a valid number"),
])
def test_each_mistake_is_one_line(settings, fragment):
    with pytest.raises(SolbenchError) as info:
        RunOptions(**({"device": "cpu"} | settings))
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_run_problems_validates_keyword_settings_before_anything_runs(tmp_path):
    with pytest.raises(SolbenchError, match="unknown run setting 'budget'"):
        solbench.run_problems([TINY / "scaled_add"], output=tmp_path / "x.jsonl", device="cpu", budget=0.1)
    assert not (tmp_path / "x.jsonl").exists()


def test_timing_config_is_derived_in_one_place():
    cpu = timing_config(RunOptions(device="cpu", budget_s=0.3), l2_bytes=50 << 20)
    assert (cpu.device, cpu.budget_s, cpu.method, cpu.l2_bytes) == ("cpu", 0.3, "auto", None)
    cuda = timing_config(RunOptions.model_construct(device="cuda:1", budget_s=1.0, timing_method="graph"), 50 << 20)
    assert (cuda.device, cuda.method, cuda.l2_bytes) == ("cuda", "graph", 50 << 20)


def test_a_jit_cache_that_is_a_file_is_refused_in_one_line(tmp_path):
    taken = tmp_path / "notes.txt"
    taken.write_text("mine")
    with pytest.raises(SolbenchError, match="--jit-cache .*notes.txt: not a folder"):
        RunOptions(device="cpu", jit_cache=taken)
    assert taken.read_text() == "mine"
    assert RunOptions(device="cpu", jit_cache=tmp_path / "new").jit_cache == str(tmp_path / "new")


def test_a_jit_cache_that_cannot_be_made_is_refused_in_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(SolbenchError, match="--jit-cache .*: cannot make it"):
        RunOptions(device="cpu", jit_cache=blocker / "store")
