"""The wheel works without a checkout: it ships the spec files and the problem library, and the CLI
finds them from an unrelated folder.

Builds the wheel from a copy of the sources (nothing is written into the checkout), unpacks it and
runs ``python -m solbench`` with only the unpacked wheel on ``PYTHONPATH``. Byte code planted in the
copy must stay out of the wheel.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ["pyproject.toml", "README.md", "MANIFEST.in", "solbench", "problems", "hardware_specs"]
SHIPPED = ("problems", "hardware_specs")


def _data_files(folder: Path) -> set[str]:
    """The files a wheel should carry from a data folder: all but byte code and hidden files."""
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
            and not any(part.startswith(".") for part in p.relative_to(folder).parts)}


def _build_flags() -> list[str]:
    """Build offline with the installed setuptools when it can (>= 68, with bdist_wheel), else let pip
    fetch the build requirements into an isolated environment."""
    try:
        import setuptools
    except ImportError:
        return []
    version = tuple(int(x) for x in setuptools.__version__.split(".")[:2] if x.isdigit())
    has_bdist_wheel = version >= (70, 1) or importlib.util.find_spec("wheel") is not None
    return ["--no-build-isolation", "--no-index"] if version >= (68, 0) and has_bdist_wheel else []


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> tuple[Path, zipfile.ZipFile]:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    junk = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, symlinks=True, ignore=junk)  # the _shipped links stay links
        else:
            shutil.copy2(path, src / name)
    for folder in ("problems/llama3_1_8b/rmsnorm/__pycache__", "solbench/__pycache__", "hardware_specs/__pycache__"):
        (src / folder).mkdir(parents=True, exist_ok=True)
        (src / folder / "planted.cpython-311.pyc").write_bytes(b"junk")
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", *_build_flags(), "-q", ".",
                          "-w", str(tmp / "dist")], cwd=src, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    (whl,) = (tmp / "dist").glob("solbench-*.whl")
    site = tmp / "site"
    with zipfile.ZipFile(whl) as z:
        z.extractall(site)
    return site, zipfile.ZipFile(whl)


def test_the_wheel_ships_every_spec_and_problem_file_and_no_junk(wheel):
    _, z = wheel
    names = set(z.namelist())
    for folder in SHIPPED:
        prefix = f"solbench/_shipped/{folder}/"
        shipped = {n.removeprefix(prefix) for n in names if n.startswith(prefix)}
        assert shipped == _data_files(ROOT / folder), folder
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".pyo"))]
    assert any(n.startswith("solbench/present/templates/") for n in names)


def _run_all(site: Path, cwd: Path, commands: dict[str, list[str]]) -> dict[str, str]:
    """Run ``python ARGS`` for each command at once (each pays the imports) with only the wheel on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOLBENCH_") and k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)
    procs = {key: subprocess.Popen([sys.executable, *args], cwd=cwd, env=env, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE) for key, args in commands.items()}
    outs = {}
    for key, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=600)  # the demo measures the CPU and runs four problems
        assert proc.returncode == 0, f"{commands[key]}: {stdout}{stderr}"
        outs[key] = stdout
    return outs


# One interpreter for most checks (each start imports torch): where solbench and its data come from,
# a shipped candidate that loads its sibling, and `list` and `sol` through the CLI's entry point.
CHECKS = """
import contextlib, io, json, sys
import solbench
from solbench.cli import main
from solbench.data.library import problems_root, spec_dirs
from solbench.worker.candidate import load_candidate

def cli(*args):
    sys.argv, out = ["solbench", *args], io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            main()
        except SystemExit as err:
            assert not err.code, (args, err.code)
    return json.loads(out.getvalue())

root = problems_root()
load_candidate(root / "llama3_1_8b/rmsnorm/solutions/torch_compile.py")
print(json.dumps({
    "where": [solbench.__file__, str(root), *map(str, spec_dirs())],
    "list": cli("list", "--format", "json"),
    "sol": cli("sol", "llama3_1_8b.attn_o_proj_residual", "--gpu", "h200_sxm", "--json"),
}))
"""


def test_the_unpacked_wheel_works_from_an_unrelated_folder(wheel, tmp_path):
    site, _ = wheel
    demo = tmp_path.parent / f"{tmp_path.name}_demo" / "demo.jsonl"  # outside the folder it runs from
    outs = _run_all(site, tmp_path, {"checks": ["-c", CHECKS], "specs": ["-m", "solbench", "specs", "--format", "json"],
                                     "demo": ["-m", "solbench", "demo", "-q", "-o", str(demo)]})
    checks = json.loads(outs["checks"])
    assert all(Path(p).resolve().is_relative_to(site.resolve()) for p in checks["where"]), checks["where"]

    specs = json.loads(outs["specs"])
    assert {s["id"] for s in specs} == {p.stem for p in (ROOT / "hardware_specs").glob("*.yaml")} | {"cpu_estimate"}
    assert len(specs) == 14
    assert len(checks["list"]) == len(list((ROOT / "problems").rglob("problem.yaml")))
    assert checks["sol"] and all(w["t_ideal_s"] > 0 for w in checks["sol"])
    assert not list(tmp_path.iterdir())  # nothing written into the folder it ran from
    # the demo exits 0 from the wheel (every torch_eager PASSED, none a REWARD_HACK), its records where asked
    demo_records = [json.loads(line) for line in demo.read_text().splitlines()]
    assert demo_records and {r["status"] for r in demo_records} == {"PASSED"}
