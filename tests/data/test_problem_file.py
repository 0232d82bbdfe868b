"""Problem files: good ones load; each kind of bad one is refused with one clear line, unexecuted."""

from pathlib import Path

import pytest
import yaml

from solbench.data.problem import load_problem
from solbench.errors import ProblemError

GOOD = {
    "name": "toy.add_residual", "description": "toy",
    "source": {"model": "toy/model", "module": "layers.*.add"},
    "tags": ["elementwise"],
    "axes": {"T": {"type": "var"}, "H": {"type": "const", "value": 64},
             "H2": {"type": "expr", "expr": "2 * H"}},
    "inputs": {"x": {"shape": ["T", "H2"], "dtype": "bfloat16"},
               "eps": {"shape": None, "dtype": "float32", "value": 1e-6}},
    "outputs": {"out": {"shape": ["T", "H2"], "dtype": "bfloat16"}},
    "reference": "reference.py:run", "flops": "T * H2", "bytes": "auto",
    "compute_dtype": "bfloat16", "tolerance": {"atol": 1e-2, "rtol": 1e-2},
    "workloads": [{"name": "small", "axes": {"T": 4}},
                  {"name": "big", "axes": {"T": 1024}, "tolerance": {"atol": 2e-2}}],
}
REF = "def run(x, eps):\n    return x * 2\n"


def write(tmp_path: Path, data, ref: str | None = REF) -> Path:
    f = tmp_path / "problem.yaml"
    f.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    if ref is not None:
        (tmp_path / "reference.py").write_text(ref)
    return f


def one_error(tmp_path, data, ref=REF) -> str:
    with pytest.raises(ProblemError) as info:
        load_problem(write(tmp_path, data, ref))
    msg = str(info.value)
    assert "Traceback" not in msg and str(tmp_path) in msg
    return msg


def test_good_problem_loads_and_resolves(tmp_path):
    p = load_problem(write(tmp_path, GOOD))
    axes = p.resolve_axes(p.workload("big"))
    assert axes == {"T": 1024, "H": 64, "H2": 128}
    assert p.shape("x", axes) == (1024, 128)
    assert p.shape("eps", axes) is None
    assert p.bytes_for(axes) == 1024 * 128 * 2 * 2  # x read + out written; scalar counts 0
    assert p.flops_for(axes) == 1024 * 128
    assert p.tolerance_for("big").atol == 2e-2 and p.tolerance_for("big").rtol == 1e-2
    assert p.tolerance_for("small").atol == 1e-2


def test_loading_does_not_execute_reference(tmp_path):
    marker = tmp_path / "executed"
    ref = f"import pathlib\npathlib.Path({str(marker)!r}).touch()\ndef run(x, eps):\n    return x\n"
    load_problem(write(tmp_path, GOOD, ref))
    assert not marker.exists()


@pytest.mark.parametrize(
    ("mutate", "expect"),
    [
        (lambda d: d["inputs"]["x"].update(dtype="bfloat17"), "inputs.x.dtype"),
        (lambda d: d["inputs"]["x"].update(shape=["T", "Q"]), "unknown axis Q"),
        (lambda d: d["workloads"][0].update(axes={}), "var axis 'T' has no value"),
        (lambda d: d["workloads"][0].update(axes={"T": -3}), "-3 must be a positive integer"),
        (lambda d: d["axes"]["H"].update(value=0), "axes.H.value: 0 must be a positive integer"),
        (lambda d: d["workloads"][1].update(name="small"), "duplicate workload name"),
        (lambda d: d.update(flops="T.__class__"), "flops: expression 'T.__class__'"),
        (lambda d: d.update(flops="__import__('os').getcwd()"), "flops: expression"),
        (lambda d: d.update(bytes="open('x').read()"), "bytes: expression"),
        (lambda d: d["axes"]["H2"].update(expr="H[0]"), "axes.H2.expr"),
        (lambda d: d.update(reference="missing.py:run"), "file 'missing.py' not found"),
        (lambda d: d.update(reference="reference.py:other"), "defines no top-level function 'other'"),
        (lambda d: d.update(reference="reference.py"), "must be 'file.py:function'"),
        (lambda d: d.update(compute_dtype="float128"), "compute_dtype"),
        (lambda d: d.pop("workloads"), "workloads: required key is missing"),
        (lambda d: d.update(colour="blue"), "colour: unknown key"),
        (lambda d: d["workloads"][0]["axes"].update(H=3), "not a var axis (const)"),
        (lambda d: d.update(name="nodot"), "<family>.<op>"),
        (lambda d: d["outputs"].update(x={"shape": ["T"], "dtype": "float32"}), "also inputs"),
        (lambda d: d.update(measured={"time": "ncu is slower"}), "measured.time"),
        (lambda d: d["inputs"]["eps"].update(value=float("nan")), "inputs.eps.value: nan is not a finite number"),
        (lambda d: d["inputs"]["eps"].update(value=float("inf")), "inputs.eps.value: inf is not a finite number"),
    ],
)
def test_bad_problem_is_refused_with_the_key(tmp_path, mutate, expect):
    import copy

    data = copy.deepcopy(GOOD)
    mutate(data)
    assert expect in one_error(tmp_path, data)


def test_reference_signature_must_match_inputs(tmp_path):
    msg = one_error(tmp_path, GOOD, "def run(eps, x):\n    return x\n")
    assert "must take the inputs in order: run(x, eps)" in msg


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("", "file is empty"),
        ("# only a comment\n", "file is empty"),
        ("name: [unclosed\n", "YAML syntax error at line"),
        ("- a\n- b\n", "top level must be a mapping"),
        ("name: a.b\nname: c.d\n", "duplicate key 'name'"),
    ],
)
def test_unreadable_yaml(tmp_path, text, expect):
    assert expect in one_error(tmp_path, text)


def test_missing_file_and_expr_cycle(tmp_path):
    with pytest.raises(ProblemError, match="file not found"):
        load_problem(tmp_path / "nope" / "problem.yaml")
    import copy

    data = copy.deepcopy(GOOD)
    data["axes"]["A"] = {"type": "expr", "expr": "B + 1"}
    data["axes"]["B"] = {"type": "expr", "expr": "A + 1"}
    assert "depend on each other" in one_error(tmp_path, data)


def test_test_axes_shrink(tmp_path):
    import copy

    data = copy.deepcopy(GOOD)
    data["test_axes"] = {"H": 8}
    p = load_problem(write(tmp_path, data))
    assert p.test_axes_resolved() == {"T": 4, "H": 8, "H2": 16}


def test_json_schema_names_fields():
    from solbench.data.problem import problem_json_schema

    schema = problem_json_schema()
    assert {"axes", "inputs", "outputs", "workloads", "flops", "bytes"} <= set(schema["properties"])
