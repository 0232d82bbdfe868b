"""Every default is declared once, in solbench/settings.py: a timeout, wait, budget, cool-down, warm-up,
flush or poll number defined anywhere else in the package fails here, and the models take theirs from it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from solbench import settings
from solbench.engine.options import RunOptions
from solbench.timing.config import TimingConfig

PACKAGE = Path(__file__).resolve().parents[1] / "solbench"
SETTINGS = PACKAGE / "settings.py"
# Names that hold a duration or budget the harness runs under (module constants, fields, parameters).
NAME = re.compile(r"timeout|_wait|wait_|budget|cooldown|cool_down|grace|poll|warmup|flush|lease|join_s|settle", re.I)


def _number(node: ast.AST) -> bool:
    """A non-zero number literal (or arithmetic on literals), also as the default of pydantic's
    ``Field(number, ...)`` or typer's ``Option(number, ...)``; 0 means "none" (no grace, no flush)."""
    if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in ("Field", "Option") and node.args:
        return _number(node.args[0])
    if isinstance(node, ast.BinOp):
        return all(isinstance(n, ast.Constant) or _number(n) for n in (node.left, node.right))
    if isinstance(node, ast.UnaryOp):
        return _number(node.operand)
    return (isinstance(node, ast.Constant) and isinstance(node.value, int | float)
            and not isinstance(node.value, bool) and node.value != 0)


def _named_values(node: ast.AST) -> list[tuple[str, ast.AST]]:
    """(name, value) pairs a node gives: assignments, annotated fields, parameter defaults, keywords."""
    if isinstance(node, ast.Assign):
        return [(t.id, node.value) for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        return [(node.target.id, node.value)]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        a = node.args
        positional = a.posonlyargs + a.args
        pairs = [(p.arg, d) for p, d in zip(positional[len(positional) - len(a.defaults):], a.defaults, strict=True)]
        return pairs + [(p.arg, d) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None]
    if isinstance(node, ast.keyword) and node.arg:
        return [(node.arg, node.value)]
    return []


def defaults_outside(source: str) -> list[str]:
    """``name = number`` lines of a module whose name says timeout, wait, budget, cool-down, ..."""
    return [f"{node.lineno}: {name} = {ast.unparse(value)[:40]}"
            for node in ast.walk(ast.parse(source)) for name, value in _named_values(node)
            if NAME.search(name) and _number(value)]


def test_no_default_is_defined_outside_the_settings_module():
    found = [f"{f.relative_to(PACKAGE.parent)}:{line}" for f in sorted(PACKAGE.rglob("*.py"))
             if f != SETTINGS and "_shipped" not in f.parts for line in defaults_outside(f.read_text())]
    assert not found, "declare these in solbench/settings.py and import them:\n" + "\n".join(found)


@pytest.mark.parametrize("source", [
    "START_TIMEOUT_S = 300.0\n",
    "FLUSH = 256 * 2**20\n",
    "class C:\n    lease_s: float = 30.0\n",
    "def cooldown(max_wait_s: float = 5.0):\n    pass\n",
    "def f(*, poll_s=-1):\n    pass\n",
    "subprocess.run(cmd, timeout=60)\n",
    "class O(BaseModel):\n    budget_s: float = Field(1.0, description='x')\n",
    "def serve(lease: float = typer.Option(30.0, '--lease')):\n    pass\n",
])
def test_the_scan_finds_a_default_defined_elsewhere(source):
    assert defaults_outside(source), source


@pytest.mark.parametrize("source", [
    "from solbench.settings import WORKER_START_TIMEOUT_S\n",
    "def wait(timeout_s: float = WORKER_START_TIMEOUT_S):\n    pass\n",
    "def f(grace_s: float = 0.0):\n    pass\n",
    "MAX_ROUNDS = 3\n",
])
def test_the_scan_leaves_names_and_other_numbers_alone(source):
    assert not defaults_outside(source), source


def test_the_models_take_their_defaults_from_the_settings():
    fields = RunOptions.model_fields
    assert (fields["timeout_s"].default, fields["compile_timeout_s"].default, fields["budget_s"].default,
            fields["cooldown_max_s"].default, fields["log_bytes"].default) == (
        settings.CALL_TIMEOUT_S, settings.COMPILE_TIMEOUT_S, settings.BUDGET_S, settings.COOLDOWN_MAX_S,
        settings.LOG_BYTES)
    config = TimingConfig()
    assert (config.budget_s, config.min_samples, config.max_samples, config.target_rel_ci, config.warmup_s,
            config.warmup_min_s, config.flush_l2_factor) == (
        settings.BUDGET_S, settings.MIN_SAMPLES, settings.MAX_SAMPLES, settings.TARGET_REL_CI, settings.WARMUP_S,
        settings.WARMUP_MIN_S, settings.FLUSH_L2_FACTOR)


def test_one_name_per_meaning():
    """A name is declared once (a second assignment would silently win)."""
    tree = ast.parse(SETTINGS.read_text())
    names = [t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)]
    assert len(names) == len(set(names)) > 30
