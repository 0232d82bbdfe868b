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
import math
import os
import re
import shutil
import stat
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


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null",
            int: "an integer", float: "a number"}.get(
        type(value), f"a {type(value).__name__}")


def _need(value: Any, types: type | tuple[type, ...], where: str, what: str) -> None:
    """Refuse ``value`` in one line unless it is of ``types`` (a bool is never a number here)."""
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in (types if isinstance(types, tuple)
                                                                                 else (types,))):
        raise ImportRefused(f"{where}: must be {what}, not {_kind(value)}")


def _check_objects(defn: dict[str, Any], section: str, where: str) -> dict[str, Any]:
    """``defn[section]``: an object of objects (absent: empty)."""
    items = defn.get(section, {})
    _need(items, dict, f"{where}{section}", "an object (name -> spec)")
    for name, spec in items.items():
        _need(spec, dict, f"{where}{section}.{name}", "an object")
    return items


def _check_tensor(spec: dict[str, Any], where: str) -> None:
    _need(spec.get("dtype", "float32"), str, f"{where}.dtype", "a dtype name (a string)")
    shape = spec.get("shape")
    if shape is not None:
        _need(shape, list, f"{where}.shape", "a list of axis names and integers, or null (a scalar)")
        for i, dim in enumerate(shape):
            _need(dim, (str, int), f"{where}.shape[{i}]", "an axis name or an integer")


def check_definition(defn: dict[str, Any]) -> None:
    """Refuse in one line a definition whose parts have the wrong JSON types (axes as a list, dtype as a
    list, a const axis without an integer value, ...), before anything is converted."""
    for key in ("name", "op_type", "description", "reference", "reference_file", "custom_inputs_entrypoint"):
        if key in defn and defn[key] is not None:
            _need(defn[key], str, key, "a string")
    for key in ("tags", "constraints"):
        _need(defn.get(key) or [], list, key, "a list of strings")
        for i, item in enumerate(defn.get(key) or []):
            _need(item, str, f"{key}[{i}]", "a string")
    for name, axis in _check_objects(defn, "axes", "").items():
        if axis.get("type") == "const":
            _need(axis.get("value"), int, f"axes.{name}.value", "an integer (a const axis's size)")
    for section in ("inputs", "outputs"):
        for name, spec in _check_objects(defn, section, "").items():
            _check_tensor(spec, f"{section}.{name}")


def check_workload(work: dict[str, Any], where: str, var_axes: list[str]) -> None:
    """Refuse in one line a workload whose axes, inputs or tolerance have the wrong JSON types."""
    for axis in var_axes:
        if axis in work["axes"]:
            _need(work["axes"][axis], int, f"{where}: axes.{axis}", "an integer")
    _check_objects(work, "inputs", f"{where}: ")
    tolerance = work.get("tolerance") or {}
    _need(tolerance, dict, f"{where}: tolerance", "an object (max_atol, max_rtol, required_matched_ratio)")
    for key, value in tolerance.items():
        _need(value, (int, float), f"{where}: tolerance.{key}", "a number")
        if not math.isfinite(value):
            raise ImportRefused(f"{where}: tolerance.{key}: must be a finite number, not {value}")


def _dtype(name: str, where: str) -> str:
    dtype = _DTYPE_ALIASES.get(name, name)
    if dtype not in DTYPES:
        raise ImportRefused(f"{where}: dtype {name!r} has no solbench equivalent (known: {', '.join(DTYPES)})")
    return dtype


def slug(text: str) -> str:
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
    text = "_".join(f"{slug(k)}{v}" for k, v in axes.items()) or "w"
    return f"w{i:02d}_{text}"[:64]


def inside(root: Path, rel: str, what: str) -> Path:
    """The regular file ``rel`` below ``root``, reached without a link, an absolute path or ``..``; else
    refused in one line (an import must never copy a file from elsewhere, ``/etc/shadow``, into a
    problem folder that candidates read)."""
    parts = Path(rel).parts
    if not rel or Path(rel).is_absolute() or ".." in parts:
        raise ImportRefused(f"{what} {rel!r}: must be a path below {root} (not absolute, no '..')")
    path = root
    for part in parts:
        path = path / part
        if path.is_symlink():
            raise ImportRefused(f"{what} {rel!r}: {path} is a symbolic link; copy the file itself there")
    if not path.is_file():
        raise ImportRefused(f"{what} {rel!r}: not found below {root}")
    return path


def _reference_source(defn: dict[str, Any], folder: Path) -> str:
    if isinstance(defn.get("reference"), str):
        return defn["reference"]
    file = defn.get("reference_file")
    if isinstance(file, str):
        path = inside(folder, file, "reference_file")
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise ImportRefused(f"reference_file {file!r}: cannot be read ({err})") from None
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
            if found is None or not found.is_file():
                where = f"--data {data}" if data is not None else "no --data folder given"
                raise ImportRefused(f"workload {w.get('uuid', '?')}: input {name} reads {rel or '(no path)'}, "
                                    f"not found ({where}); download the dataset's blobs and pass --data ROOT")
            found = inside(data, rel, f"workload {w.get('uuid', '?')}: input {name} path")
            flat = slug(rel.replace("/", "__"))
            dest.mkdir(parents=True, exist_ok=True)
            _copy_no_follow(found, dest / flat)
            key = tuple(int(w["axes"][a]) for a in var_axes)
            table.setdefault(key, {})[name] = (flat, str(src.get("tensor_key", name)))
    return table


def _copy_no_follow(src: Path, dst: Path) -> None:
    """Copy a regular file, refusing one swapped for a link since it was checked."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as err:
        raise ImportRefused(f"{src}: cannot be read without following a link ({err.strerror})") from None
    with os.fdopen(fd, "rb") as fin:
        if not stat.S_ISREG(os.fstat(fin.fileno()).st_mode):
            raise ImportRefused(f"{src}: not a regular file")
        with open(dst, "wb") as fout:
            shutil.copyfileobj(fin, fout)


def problem_data(defn: dict[str, Any], workloads: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """The problem.yaml mapping of a definition and its workloads, and notes for the user."""
    name = str(defn.get("name") or "definition")
    inputs, outputs = _tensors(defn, "inputs", workloads), _tensors(defn, "outputs", workloads)
    flops, nbytes, cost_note = costs_for(defn)
    tolerance, tol_note = _tolerance(workloads)
    tags = [t for t in (slug(str(t).replace(":", "-"))[:64] for t in defn.get("tags", [])) if t[0].isalnum()]
    models = [str(t).split(":", 1)[1] for t in defn.get("tags", []) if str(t).startswith("model:")]
    var_axes = [a for a, spec in defn.get("axes", {}).items() if spec.get("type") == "var"]
    data: dict[str, Any] = {
        "name": f"flashinfer.{slug(name)}",
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
    _checked(check_definition, defn, where=definition.name)
    workloads = read_workloads(workloads_file) if workloads_file else []
    if not workloads:
        raise ImportRefused(f"{definition.name}: no workloads: pass --workloads WORKLOADS.jsonl (a definition "
                            "alone has no sizes for its var axes)")
    var_axes = [a for a, spec in defn.get("axes", {}).items() if spec.get("type") == "var"]
    for i, work in enumerate(workloads):
        _checked(check_workload, work, f"workload {work.get('uuid', i)!s:.80}", var_axes, where=definition.name)
    try:
        return _write_problem(definition, defn, workloads, out_dir, data_root)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as err:  # a shape no check above named
        raise ImportRefused(f"{definition.name}: malformed definition or workload "
                            f"({type(err).__name__}: {str(err)[:200]})") from None


def _checked(check: Any, *args: Any, where: str) -> None:
    """Run a check; its refusal names the definition file."""
    try:
        check(*args)
    except ImportRefused as err:
        raise ImportRefused(f"{where}: {err}") from None


def _write_problem(definition: Path, defn: dict[str, Any], workloads: list[dict[str, Any]], out_dir: Path,
                   data_root: Path | None) -> tuple[Path, list[str]]:
    data, notes = problem_data(defn, workloads)
    source = _reference_source(defn, definition.parent)
    var_axes = [a for a, spec in data["axes"].items() if spec["type"] == "var"]
    stored = _stored_inputs(workloads, var_axes, data_root, out_dir / "data")
    entry = defn.get("custom_inputs_entrypoint")
    if stored and entry:
        raise ImportRefused(f"{definition.name}: both stored (safetensors) and custom inputs; solbench takes one")
    if entry:
        source += _CUSTOM_WRAPPER.format(entry=slug(str(entry)))
    elif stored:
        source += _SAFETENSORS_WRAPPER.format(table=stored, var_axes=var_axes)
    if entry or stored:
        data["input_generator"] = "reference.py:solbench_make_inputs"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "reference.py").write_text(source.rstrip() + "\n", encoding="utf-8")
    problem_file = out_dir / "problem.yaml"
    problem_file.write_text(yaml.safe_dump(data, sort_keys=False, width=110), encoding="utf-8")
    return problem_file, notes
