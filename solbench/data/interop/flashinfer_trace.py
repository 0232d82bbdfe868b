"""FlashInfer-Trace (and SOL-ExecBench) definitions and workloads -> a solbench problem folder.

A Definition (``name, op_type, axes {const|var|expr}, inputs, outputs, reference`` with a global
``run``, optional ``constraints`` and ``custom_inputs_entrypoint``) becomes ``problem.yaml`` and
``reference.py``; its workloads (JSONL: bare ``{uuid, axes, inputs, tolerance}`` objects or trace
lines wrapping one under ``workload``) become solbench workloads. Inputs of type ``random`` are
solbench's own seeded inputs; ``scalar`` gives a scalar input its value per workload (solbench's
workload ``inputs:``; the first workload's value is the declared one); ``safetensors`` inputs are
read from ``--data ROOT`` and copied into the problem's ``data/`` folder, served by a generated input
generator; a missing file is refused in one line.
Tolerance: ``max_atol``, ``max_rtol`` and ``required_matched_ratio`` (as ``max_mismatch_ratio``).
``constraints`` that relate axes (``H_qo == H_kv * H_r``) become the problem's checked ``constraints:``;
those over tensor values (``num_kv_indices == kv_indptr[-1].item()``) are kept as a note.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import yaml

from solbench.data.dtypes import DTYPES
from solbench.data.interop.op_costs import costs_for
from solbench.errors import SolbenchError

_DTYPE_ALIASES = {"f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16", "i64": "int64",
                  "i32": "int32", "i16": "int16", "i8": "int8", "f8_e4m3fn": "float8_e4m3fn", "f8_e5m2": "float8_e5m2"}
_FLOAT_RANK = ["float8_e5m2", "float8_e4m3fn", "float16", "bfloat16", "float32", "float64"]
DEFAULT_TOLERANCE = {"max_atol": 1e-2, "max_rtol": 1e-2, "required_matched_ratio": 0.99}


class ImportRefused(SolbenchError):
    """A definition or workload solbench cannot take; the message is one line naming what and why."""


def read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ImportRefused(f"{what} {path} not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ImportRefused(f"{path}: not a JSON {what} ({err})") from None
    if not isinstance(data, dict):
        raise ImportRefused(f"{path}: a {what} is a JSON object")
    return data


def read_workloads(path: Path) -> list[dict[str, Any]]:
    """Workload objects from a JSONL file (bare, or wrapped in a trace line under ``workload``)."""
    out = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise ImportRefused(f"workloads file {path}: {err.strerror or err}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise ImportRefused(f"{path}:{n}: not JSON ({err.msg})") from None
        work = obj.get("workload", obj) if isinstance(obj, dict) else None
        if not isinstance(work, dict) or not isinstance(work.get("axes"), dict):
            raise ImportRefused(f"{path}:{n}: a workload needs an 'axes' object")
        out.append(work)
    return out


def _dtype(name: str, where: str) -> str:
    dtype = _DTYPE_ALIASES.get(name, name)
    if dtype not in DTYPES:
        raise ImportRefused(f"{where}: dtype {name!r} has no solbench equivalent (known: {', '.join(DTYPES)})")
    return dtype


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_\-]+", "_", text).strip("_") or "x"


def _axes(defn: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, axis in defn.get("axes", {}).items():
        kind = axis.get("type")
        desc = {"description": axis["description"]} if axis.get("description") else {}
        if kind == "const":
            out[name] = {"type": "const", "value": int(axis["value"]), **desc}
        elif kind == "var":
            out[name] = {"type": "var", **desc}
        elif kind == "expr":
            out[name] = {"type": "expr", "expr": str(axis.get("expression", axis.get("expr"))), **desc}
        else:
            raise ImportRefused(f"axes.{name}: type {kind!r} is not const, var or expr")
    return out


def _scalar_of(workload: dict[str, Any], name: str) -> Any:
    """The workload's value of scalar input ``name`` (``{"type": "scalar", "value": v}``), or None."""
    src = (workload.get("inputs") or {}).get(name)
    return src.get("value") if isinstance(src, dict) and src.get("type") == "scalar" else None


def _tensors(defn: dict[str, Any], section: str, workloads: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, spec in defn.get(section, {}).items():
        where = f"{section}.{name}"
        item: dict[str, Any] = {"shape": spec.get("shape"), "dtype": _dtype(spec.get("dtype", "float32"), where)}
        if spec.get("description"):
            item["description"] = spec["description"]
        if item["shape"] is None and section == "inputs":
            item["value"] = _scalar_value(name, workloads)
        out[name] = item
    return out


def _scalar_value(name: str, workloads: list[dict[str, Any]]) -> Any:
    """The declared value of a scalar input: the first workload's (each workload states its own too,
    :func:`_workload_scalars`); refused in one line when a workload gives none."""
    for i, w in enumerate(workloads):
        if _scalar_of(w, name) is None:
            raise ImportRefused(f"inputs.{name}: workload {w.get('uuid', i)} gives no value for this scalar input "
                                "(FlashInfer-Trace states it per workload as {\"type\": \"scalar\", \"value\": ...})")
    return workloads[0]["inputs"][name]["value"] if workloads else None


def _workload_scalars(defn: dict[str, Any], workload: dict[str, Any]) -> dict[str, Any]:
    """A workload's own scalar values, for solbench's per-workload ``inputs:``, when the definition's
    scalars differ between workloads (``sm_scale``, ``eps``, a top-k ``k``)."""
    names = [n for n, spec in defn.get("inputs", {}).items() if spec.get("shape") is None]
    return {n: _scalar_of(workload, n) for n in names if _scalar_of(workload, n) is not None}


def _constraints(defn: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The source's constraints solbench can check (relations between axes), and those it cannot
    (over tensor values, ``kv_indptr[-1]``, or names that are not axes), kept as a note."""
    from solbench.data import expr
    from solbench.errors import ExpressionError

    axes, checked, other = set(defn.get("axes", {})), [], []
    for text in map(str, defn.get("constraints") or []):
        try:
            expr.parse_relation(text)
            fits = expr.relation_names(text) <= axes
        except ExpressionError:
            fits = False
        (checked if fits else other).append(text)
    return checked, other


def _compute_dtype(inputs: dict[str, Any]) -> str:
    floats = [t["dtype"] for t in inputs.values() if t["dtype"] in _FLOAT_RANK and t["shape"] is not None]
    if not floats:
        return "float32"
    lowest = min(floats, key=_FLOAT_RANK.index)
    return "float8_e4m3fn" if lowest.startswith("float8") else lowest


def _tolerance(workloads: list[dict[str, Any]]) -> tuple[dict[str, float], str]:
    """The first workload's tolerance (they agree in every published file), and a note if clamped."""
    tol = {**DEFAULT_TOLERANCE, **(workloads[0].get("tolerance") or {} if workloads else {})}
    ratio = round(1.0 - float(tol.get("required_matched_ratio") or 1.0), 9)
    note = ""
    if ratio > 0.01:
        note = (f"the source allows {ratio:.1%} mismatched elements; solbench allows at most 1% without a reason, "
                "so 1% is kept (stricter than the source)")
        ratio = 0.01
    return {"atol": float(tol["max_atol"]), "rtol": float(tol["max_rtol"]),
            "max_mismatch_ratio": round(max(ratio, 0.0), 6)}, note


def _workload_name(i: int, axes: dict[str, int]) -> str:
    text = "_".join(f"{_slug(k)}{v}" for k, v in axes.items()) or "w"
    return f"w{i:02d}_{text}"[:64]


def _reference_source(defn: dict[str, Any], folder: Path) -> str:
    if isinstance(defn.get("reference"), str):
        return defn["reference"]
    file = defn.get("reference_file")
    if isinstance(file, str) and not Path(file).is_absolute() and ".." not in Path(file).parts:
        path = folder / file
        if path.is_file():
            return path.read_text(encoding="utf-8")
        raise ImportRefused(f"reference_file {file!r} not found next to the definition")
    raise ImportRefused("the definition has no 'reference' source (nor a 'reference_file' next to it)")


_CUSTOM_WRAPPER = '''

def solbench_make_inputs(axes, generator, device):
    """solbench's input generator over the definition's custom_inputs_entrypoint (seeded from solbench's seed)."""
    import torch as _torch

    _torch.manual_seed(int(generator.initial_seed()))
    return dict({entry}(dict(axes), device))
'''

_SAFETENSORS_WRAPPER = '''

_SOLBENCH_FILES = {table!r}  # var-axis values -> {{input: (file under data/, tensor key)}}


def solbench_make_inputs(axes, generator, device):
    """The workload's stored inputs (safetensors, copied into data/ at import); the rest are random."""
    from pathlib import Path as _Path

    from safetensors.torch import load_file

    key = tuple(int(axes[a]) for a in {var_axes!r})
    out = {{}}
    for name, (file, tensor_key) in _SOLBENCH_FILES.get(key, {{}}).items():
        out[name] = load_file(str(_Path(__file__).parent / "data" / file))[tensor_key].to(device)
    return out
'''


def _stored_inputs(workloads: list[dict[str, Any]], var_axes: list[str], data: Path | None,
                   dest: Path) -> dict[tuple[int, ...], dict[str, tuple[str, str]]]:
    """Each workload's safetensors inputs, copied under ``dest``; refused in one line when missing."""
    table: dict[tuple[int, ...], dict[str, tuple[str, str]]] = {}
    for w in workloads:
        for name, src in (w.get("inputs") or {}).items():
            if not isinstance(src, dict) or src.get("type") != "safetensors":
                continue
            rel = str(src.get("path", "")).removeprefix("./")
            found = (data / rel) if data is not None and rel else None
            if found is None or not found.is_file() or ".." in Path(rel).parts:
                where = f"--data {data}" if data is not None else "no --data folder given"
                raise ImportRefused(f"workload {w.get('uuid', '?')}: input {name} reads {rel or '(no path)'}, "
                                    f"not found ({where}); download the dataset's blobs and pass --data ROOT")
            flat = _slug(rel.replace("/", "__"))
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(found, dest / flat)
            key = tuple(int(w["axes"][a]) for a in var_axes)
            table.setdefault(key, {})[name] = (flat, str(src.get("tensor_key", name)))
    return table


def problem_data(defn: dict[str, Any], workloads: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """The problem.yaml mapping of a definition and its workloads, and notes for the user."""
    name = str(defn.get("name") or "definition")
    inputs, outputs = _tensors(defn, "inputs", workloads), _tensors(defn, "outputs", workloads)
    flops, nbytes, cost_note = costs_for(defn)
    tolerance, tol_note = _tolerance(workloads)
    tags = [t for t in (_slug(str(t).replace(":", "-"))[:64] for t in defn.get("tags", [])) if t[0].isalnum()]
    models = [str(t).split(":", 1)[1] for t in defn.get("tags", []) if str(t).startswith("model:")]
    var_axes = [a for a, spec in defn.get("axes", {}).items() if spec.get("type") == "var"]
    data: dict[str, Any] = {
        "name": f"flashinfer.{_slug(name)}",
        "description": str(defn.get("description") or f"FlashInfer-Trace definition {name}").splitlines()[0][:300],
        "source": {"model": models[0] if models else "unknown",
                   "note": f"imported from FlashInfer-Trace definition {name} (op_type {defn.get('op_type', '?')})"},
        "tags": tags, "axes": _axes(defn), "inputs": inputs, "outputs": outputs,
        "reference": "reference.py:run", "flops": flops, "bytes": nbytes,
        "compute_dtype": _compute_dtype(inputs), "tolerance": tolerance,
        "workloads": [_workload(i, w, var_axes, defn) for i, w in enumerate(workloads)],
        "notes": " ".join(n for n in (cost_note, tol_note) if n),
    }
    checked, unchecked = _constraints(defn)
    if checked:
        data["constraints"] = checked  # solbench checks every workload (and test_axes) against them
    constraint_note = (f"constraints of the source that are not relations between axes, not checked: "
                       f"{'; '.join(unchecked)}") if unchecked else ""
    if constraint_note:
        data["notes"] += f" {constraint_note}."
    return data, [n for n in (cost_note, tol_note, constraint_note) if n]


def _workload(i: int, w: dict[str, Any], var_axes: list[str], defn: dict[str, Any]) -> dict[str, Any]:
    axes = {a: int(w["axes"][a]) for a in var_axes if a in w["axes"]}
    out: dict[str, Any] = {"name": _workload_name(i, axes), "axes": axes}
    scalars = _workload_scalars(defn, w)
    if scalars:
        out["inputs"] = scalars
    return out


def import_definition(definition: Path, out_dir: Path, workloads_file: Path | None = None,
                      data_root: Path | None = None) -> tuple[Path, list[str]]:
    """Write ``out_dir/problem.yaml`` and ``reference.py`` (and ``data/``) from a definition; return
    the problem file and notes. Raises ImportRefused (one line) for what solbench cannot take."""
    defn = read_json(definition, "definition")
    workloads = read_workloads(workloads_file) if workloads_file else []
    if not workloads:
        raise ImportRefused(f"{definition.name}: no workloads: pass --workloads WORKLOADS.jsonl (a definition "
                            "alone has no sizes for its var axes)")
    data, notes = problem_data(defn, workloads)
    source = _reference_source(defn, definition.parent)
    var_axes = [a for a, spec in data["axes"].items() if spec["type"] == "var"]
    stored = _stored_inputs(workloads, var_axes, data_root, out_dir / "data")
    entry = defn.get("custom_inputs_entrypoint")
    if stored and entry:
        raise ImportRefused(f"{definition.name}: both stored (safetensors) and custom inputs; solbench takes one")
    if entry:
        source += _CUSTOM_WRAPPER.format(entry=_slug(str(entry)))
    elif stored:
        source += _SAFETENSORS_WRAPPER.format(table=stored, var_axes=var_axes)
    if entry or stored:
        data["input_generator"] = "reference.py:solbench_make_inputs"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "reference.py").write_text(source.rstrip() + "\n", encoding="utf-8")
    problem_file = out_dir / "problem.yaml"
    problem_file.write_text(yaml.safe_dump(data, sort_keys=False, width=110), encoding="utf-8")
    return problem_file, notes
