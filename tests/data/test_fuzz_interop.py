"""Fuzzing (hypothesis) of what `solbench import` reads: FlashInfer-Trace definitions and workloads, and
KernelBench modules.

Property: any generated input either imports (and the problem it writes loads, its generated
reference parses and names its source file as a string) or is refused with one line (a
:class:`SolbenchError`); never a traceback, never a file copied from outside the definition's folder.

The budget is fixed, like tests/data/test_fuzz_files.py: derandomised, no example database, no
deadline; 150 mutated definitions, 150 mutated workload files, 25 KernelBench modules (their code
runs on the meta device): about 25 s on 2 cores. ``SOLBENCH_FUZZ_SCALE=20`` runs twenty times as many.
Against the importers before these checks, all four tests fail (tracebacks from axes as a list,
dtype as a list, tolerance as text, a module that calls ``.item()`` on meta tensors or ``sys.exit``).
"""

from __future__ import annotations

import ast
import copy
import json
import os
import sys
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from solbench.data.interop.flashinfer_trace import import_definition  # noqa: E402
from solbench.data.problem import load_problem  # noqa: E402
from solbench.engine.kernelbench import import_module  # noqa: E402
from solbench.errors import SolbenchError  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_fuzz_files import DEEP, VALUES, _apply_to, _paths  # noqa: E402

pytestmark = pytest.mark.slow  # about 25 s: CI's second step runs it
SCALE = int(os.environ.get("SOLBENCH_FUZZ_SCALE", "1"))


def _budget(n: int) -> settings:
    return settings(max_examples=n * SCALE, derandomize=True, database=None, deadline=None,
                    suppress_health_check=list(HealthCheck))


FI = Path(__file__).resolve().parents[1] / "fixtures" / "interop" / "flashinfer_trace"
DEFINITION = json.loads((FI / "rmsnorm_h4096.json").read_text())
WORKLOADS = [(lambda o: o.get("workload", o))(json.loads(line))
             for line in (FI / "rmsnorm_h2048.jsonl").read_text().splitlines() if line.strip()][:2]
SECRET = "SECRET-OUTSIDE-THE-DATA-ROOT"

# Values a converter is likely to trip on, besides any JSON: wrong containers, paths that leave.
_PATHS = st.sampled_from(["/etc/passwd", "../secret.txt", "./blob/../../secret.txt", "link.safetensors", "", "."])
_JSONISH = st.one_of(VALUES, DEEP, _PATHS, st.sampled_from([[], {}, None, "var", "const", "bfloat16", 4096, 1.5,
                                                             float("nan"), float("inf"), -1, 2**70]))


def _mutations(data: object) -> st.SearchStrategy:
    paths = [p for p in _paths(data) if p]
    return st.lists(st.tuples(st.sampled_from(paths), _JSONISH), min_size=1, max_size=4)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A definition folder whose data root holds a link out and, above it, a secret."""
    path = tmp_path_factory.mktemp("fuzz_interop")
    (path / "secret.txt").write_text(SECRET)
    (path / "def").mkdir()
    (path / "def" / "link.safetensors").symlink_to(path / "secret.txt")
    (path / "def" / "ref.py").write_text("def run(hidden_states, weight):\n    return hidden_states\n")
    return path


def _imports_or_one_line(folder: Path, defn: object, workloads: list) -> None:
    d, w, out = folder / "def" / "d.json", folder / "def" / "w.jsonl", folder / "out"
    d.write_text(json.dumps(defn))
    w.write_text("\n".join(json.dumps(x) for x in workloads) + "\n")
    try:
        load_problem(import_definition(d, out, w, folder / "def")[0])
    except SolbenchError as err:
        assert "\n" not in str(err) and "Traceback" not in str(err), str(err)
    if (out / "data").is_dir():
        assert not any(SECRET in p.read_text(errors="replace") for p in (out / "data").iterdir() if p.is_file())


@_budget(150)
@given(_mutations(DEFINITION))
def test_mutated_definitions_import_or_give_one_line(folder, mutations):
    _imports_or_one_line(folder, _apply_to(DEFINITION, mutations), WORKLOADS)


@_budget(150)
@given(_mutations(WORKLOADS))
def test_mutated_workloads_import_or_give_one_line(folder, mutations):
    workloads = _apply_to(WORKLOADS, mutations)
    stored = copy.deepcopy(workloads)  # some with a stored input, whose path the mutations may point out
    for w in stored:
        if isinstance(w, dict) and isinstance(w.get("inputs"), dict):
            w["inputs"]["hidden_states"] = {"type": "safetensors", "path": "link.safetensors"}
    _imports_or_one_line(folder, DEFINITION, workloads)
    _imports_or_one_line(folder, DEFINITION, stored)


@_budget(60)
@given(st.one_of(VALUES, DEEP))
def test_any_json_as_a_definition_or_a_workload_gives_one_line(folder, data):
    _imports_or_one_line(folder, data, WORKLOADS)
    _imports_or_one_line(folder, DEFINITION, [data])


# --- KernelBench modules -------------------------------------------------------------------------------

_SHAPES = st.lists(st.integers(0, 8), min_size=0, max_size=3)
_DTYPES = st.sampled_from(["torch.float32", "torch.bfloat16", "torch.int64", "torch.bool", "torch.complex64"])
_INPUT = st.one_of(
    st.tuples(_SHAPES, _DTYPES).map(lambda t: f"torch.zeros({t[0]}, dtype={t[1]})"),
    st.sampled_from(["3", "2.5", "True", "'text'", "None", "[torch.ones(2)]", "{'a': 1}", "float('nan')"]),
)
_FORWARD = st.sampled_from([
    "return x0 * 2", "return x0 @ self.w", "return (x0, x0 + 1)", "return {'a': x0}", "return 3",
    "return x0 * int(x0.sum().item())", "raise ValueError('no\\nway')", "return x0.view(-1, 5)", "return self.w.sum()",
    "return torch.relu(x0)", "return None", "import sys; sys.exit(0)",
])
_INIT = st.sampled_from(["[]", "[4]", "['x']", "[None]", "1/0"])
_NAMES = st.sampled_from(['m.py', '1_Square.py', 'x""";P=1;""".py', "it's.py", "uni\u00e9\u202e.py", "sp ace.py"])

MODULE = """import torch


class Model(torch.nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(4, 4))
        self.register_buffer("odd-name.x" if False else "odd_name", torch.ones(4))

    def forward(self, *xs):
        x0 = xs[0] if xs else torch.ones(2, 4)
        {forward}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return {init}
"""


@_budget(25)
@given(_NAMES, st.lists(_INPUT, max_size=3), _FORWARD, _INIT)
def test_kernelbench_modules_import_or_give_one_line(tmp_path_factory, name, inputs, forward, init):
    folder = tmp_path_factory.mktemp("kb")
    path = folder / name
    path.write_text(MODULE.format(forward=forward, inputs=", ".join(inputs), init=init))
    try:
        problem = load_problem(import_module(path, folder / "p")[0])
    except SolbenchError as err:
        assert "\n" not in str(err) and "Traceback" not in str(err), str(err)
        return
    except SystemExit:
        pytest.fail("a module's sys.exit ended the import")
    reference = (folder / "p" / "reference.py").read_text()
    tree = ast.parse(reference)  # the file name never breaks the generated code
    names = [n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "KERNELBENCH_FILE"]
    assert ast.literal_eval(names[0].value) == name and problem.workloads
