"""Hostile and malformed input to `solbench import`: every refusal is one line (never a traceback), an
import never copies a file from outside the definition's folder or data root, and a KernelBench
file's name never becomes code in the generated reference."""

from __future__ import annotations

import ast
import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from solbench.data.interop.flashinfer_trace import ImportRefused, import_definition
from solbench.data.problem import load_problem
from solbench.engine.kernelbench import import_module
from solbench.engine.problem_code import load_reference
from solbench.errors import SolbenchError

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "interop"
FI = FIX / "flashinfer_trace"
ROOT = Path(__file__).resolve().parents[2]
BASE = json.loads((FI / "rmsnorm_h4096.json").read_text())
WORKLOADS = [(lambda o: o.get("workload", o))(json.loads(line))
             for line in (FI / "rmsnorm_h2048.jsonl").read_text().splitlines() if line.strip()]


def _write(folder: Path, defn: dict, workloads: list[dict]) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "d.json").write_text(json.dumps(defn))
    (folder / "w.jsonl").write_text("\n".join(json.dumps(w) for w in workloads) + "\n")
    return folder / "d.json", folder / "w.jsonl"


def _refusal(folder: Path, defn: dict, workloads: list[dict], data: Path | None = None) -> str:
    d, w = _write(folder, defn, workloads)
    with pytest.raises(SolbenchError) as info:
        load_problem(import_definition(d, folder / "p", w, data)[0])
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def _edit(path: str, value):
    """A copy of the rmsnorm definition with the item at ``path`` (dotted) set to ``value``."""
    defn = copy.deepcopy(BASE)
    *parents, last = path.split(".")
    target = defn
    for key in parents:
        target = target[key]
    target[last] = value
    return defn


DEFINITIONS = [
    ("axes", ["batch_size"], "axes: must be an object"),
    ("axes.batch_size", "var", "axes.batch_size: must be an object, not a string"),
    ("axes.hidden_size.value", "4096", "axes.hidden_size.value: must be an integer"),
    ("axes.hidden_size.value", None, "axes.hidden_size.value: must be an integer"),
    ("axes.hidden_size.value", 40.5, "axes.hidden_size.value: must be an integer"),
    ("inputs.weight.dtype", ["bfloat16"], "inputs.weight.dtype: must be a dtype name"),
    ("inputs", ["weight"], "inputs: must be an object"),
    ("inputs.weight", 3, "inputs.weight: must be an object, not an integer"),
    ("inputs.weight.shape", "hidden_size", "inputs.weight.shape: must be a list"),
    ("inputs.weight.shape", [["hidden_size"]], "inputs.weight.shape[0]: must be an axis name or an integer"),
    ("outputs", None, "outputs: must be an object"),
    ("tags", "abc", "tags: must be a list of strings"),
    ("tags", [{"a": 1}], "tags[0]: must be a string"),
    ("constraints", "a == b", "constraints: must be a list"),
    ("reference", 3, "reference: must be a string"),
    ("description", ["x"], "description: must be a string"),
    ("name", {"a": 1}, "name: must be a string"),
    ("custom_inputs_entrypoint", ["gen"], "custom_inputs_entrypoint: must be a string"),
]


@pytest.mark.parametrize(("path", "value", "expect"), DEFINITIONS)
def test_a_malformed_definition_is_refused_in_one_line(tmp_path, path, value, expect):
    assert expect in _refusal(tmp_path, _edit(path, value), WORKLOADS)


WORKLOAD_EDITS = [
    ({"tolerance": "tight"}, "tolerance: must be an object"),
    ({"tolerance": {"max_atol": "x"}}, "tolerance.max_atol: must be a number"),
    ({"tolerance": {"required_matched_ratio": "0.9"}}, "tolerance.required_matched_ratio: must be a number"),
    ({"tolerance": {"max_rtol": float("inf")}}, "tolerance.max_rtol: must be a finite number"),
    ({"axes": {"batch_size": "x"}}, "axes.batch_size: must be an integer"),
    ({"axes": {"batch_size": 1.5}}, "axes.batch_size: must be an integer, not a number"),
    ({"inputs": ["hidden_states"]}, "inputs: must be an object"),
]


@pytest.mark.parametrize(("edit", "expect"), WORKLOAD_EDITS)
def test_a_malformed_workload_is_refused_in_one_line(tmp_path, edit, expect):
    assert expect in _refusal(tmp_path, BASE, [{**w, **edit} for w in WORKLOADS])


def _stored(path: str) -> list[dict]:
    return [{"uuid": "st-0", "axes": {"batch_size": 3}, "inputs": {
        "hidden_states": {"type": "safetensors", "path": path, "tensor_key": "hidden_states"},
        "weight": {"type": "random"}}}]


def test_data_paths_outside_the_data_root_are_refused(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("root:$6$hash")
    root = tmp_path / "data"
    (root / "blob").mkdir(parents=True)
    (root / "blob" / "link.safetensors").symlink_to(secret)
    (root / "linked").symlink_to(tmp_path)
    cases = {str(secret): "not absolute", "../secret": "not absolute, no '..'",
             "blob/link.safetensors": "is a symbolic link", "linked/secret": "is a symbolic link"}
    for path, expect in cases.items():
        assert expect in _refusal(tmp_path / "w", BASE, _stored(path), root)
        copied = [p for p in (tmp_path / "w" / "p").rglob("*") if p.is_file()] if (tmp_path / "w" / "p").exists() else []
        assert not any(p.read_bytes() == secret.read_bytes() for p in copied)


def test_a_reference_file_that_is_a_link_is_refused(tmp_path):
    secret = tmp_path / "secret.py"
    secret.write_text("def run(hidden_states, weight):\n    return hidden_states  # elsewhere\n")
    folder = tmp_path / "def"
    folder.mkdir()
    (folder / "ref.py").symlink_to(secret)
    defn = {k: v for k, v in BASE.items() if k != "reference"} | {"reference_file": "ref.py"}
    assert "ref.py is a symbolic link" in _refusal(folder, defn, WORKLOADS)
    assert not (folder / "p" / "reference.py").exists()


KB_MODULE = """import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(4, 4))
        self.register_buffer("odd-name", torch.ones(4))

    def forward(self, x):
        {body}


def get_inputs():
    return [torch.randn(2, 4)]


def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_a_kernelbench_file_name_never_becomes_code(tmp_path):
    name = 'x""";PLANTED = 1;""".py'
    (tmp_path / name).write_text(KB_MODULE.format(body="return x @ self.w"))
    problem = load_problem(import_module(tmp_path / name, tmp_path / "p")[0])
    reference = load_reference(problem)
    assert not hasattr(sys.modules[reference.__module__], "PLANTED")
    assert sys.modules[reference.__module__].KERNELBENCH_FILE == name
    assert "p_odd_name" in problem.inputs


@pytest.mark.slow
def test_a_kernelbench_module_calling_item_on_meta_is_one_line(tmp_path):
    path = tmp_path / "item.py"
    path.write_text(KB_MODULE.format(body="return x * int(x.sum().item())"))
    with pytest.raises(ImportRefused, match="item.py: cannot build .* Tensor.item\\(\\) cannot be called on meta"):
        import_module(path, tmp_path / "p")
    cli = subprocess.run([sys.executable, "-m", "solbench", "import", "kernelbench", str(path), "-o", str(tmp_path / "q")],
                         capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert cli.returncode != 0 and "Traceback" not in cli.stderr and len(cli.stderr.strip().splitlines()) == 1


def test_a_solutions_entry_point_never_becomes_code(tmp_path):
    """An entry point with quotes (file and function names are the Solution author's text) is a string
    in the generated wrapper: it cannot close the docstring or the literal and add statements."""
    from solbench.data.interop.solutions import import_solution

    file = 'k""";PLANTED = 1;""".py'
    func = 'run"); PLANTED = 2; ("'
    sol = {"name": "s", "spec": {"languages": ["pytorch"], "entry_point": f"{file}::{func}",
                                 "destination_passing_style": False},
           "sources": [{"path": file, "content": "def run(x):\n    return x\n"}]}
    (tmp_path / "s.json").write_text(json.dumps(sol))
    wrapper = import_solution(tmp_path / "s.json", tmp_path / "solutions", {})
    tree = ast.parse(wrapper.read_text())
    assigned = {t.id: n.value for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                if isinstance(t, ast.Name)}
    assert "PLANTED" not in assigned and ast.literal_eval(assigned["ENTRY_POINT"]) == f"{file}::{func}"
