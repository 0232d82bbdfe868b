"""A KernelBench module (``Model``, ``get_inputs``, ``get_init_inputs``) -> a solbench problem folder.

The module is copied next to the problem as ``kernelbench_module.py``; ``reference.py`` builds the
``Model`` once and calls it through ``torch.func.functional_call`` with its parameters and buffers
passed as inputs (after ``forward``'s own), so a candidate receives the weights like any other
input. Shapes and dtypes come from ``get_inputs()`` and the model, built on the ``meta`` device
(nothing is allocated, whatever the sizes). FLOPs are counted with FlopCounterMode on the meta
tensors; when it counts none (elementwise-only modules) the problem says ``flops: 0`` and a note
asks for a formula. Importing runs the module's code in this process (here, one layer above the data
layer, which runs none): import only files you trust as much as a reference.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import yaml

from solbench.data import ImportRefused, slug
from solbench.worker import import_file, module_name

_REFERENCE = '''"""{title} of a KernelBench module (KERNELBENCH_FILE): Model(*get_init_inputs()) through functional_call.{more}"""

import torch

import solbench

KERNELBENCH_FILE = {file!r}
_module = solbench.load_sibling(__file__, {module!r})
_model = None
_FORWARD = {forward!r}
_STATE = {state!r}


def run({args}):
    global _model
    if _model is None:
        with torch.device("meta"):
            _model = _module.Model(*_module.get_init_inputs())
    values = [{args}]
    state = dict(zip(_STATE, values[len(_FORWARD):]))
    return torch.func.functional_call(_model, state, tuple(values[:len(_FORWARD)]))
'''


def _meta_model(module: Any) -> tuple[Any, list[Any]]:
    import torch

    with torch.device("meta"):
        model = module.Model(*module.get_init_inputs())
        inputs = list(module.get_inputs())
    return model, inputs


def _spec(t: Any) -> dict[str, Any]:
    import torch

    if isinstance(t, torch.Tensor):
        return {"shape": [int(s) for s in t.shape], "dtype": str(t.dtype).removeprefix("torch.")}
    if isinstance(t, bool | int | float):
        return {"shape": None, "dtype": "float32" if isinstance(t, float) else "int64", "value": t}
    raise ImportRefused(f"get_inputs() returned a {type(t).__name__}; solbench takes tensors and numbers")


def _count_flops(model: Any, inputs: list[Any]) -> int:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(*inputs)
    return int(counter.get_total_flops())


def _run_module(path: Path) -> tuple[Any, list[Any], dict[str, Any], tuple[Any, ...], int]:
    """Build the module's Model and inputs on the meta device and run it once: model, inputs, state,
    outputs, counted FLOPs. Any failure of the module's code (``.item()`` on a meta tensor, ...) is
    refused in one line."""
    import torch

    try:
        module = import_file(path.resolve(), module_name("_solbench_kernelbench_", path.resolve()))
        model, inputs = _meta_model(module)
        state = dict(model.named_parameters()) | dict(model.named_buffers())
        with torch.device("meta"):
            out = torch.func.functional_call(model, dict(state), tuple(inputs))
        flops = _count_flops(model, inputs)
    except FileNotFoundError:
        raise ImportRefused(f"KernelBench module {path} not found") from None
    except (Exception, SystemExit) as err:  # noqa: BLE001 - the user's module: its failure (or exit), in one line
        message = " ".join(str(err).split())[:300]
        raise ImportRefused(f"{path.name}: cannot build Model(*get_init_inputs()) / get_inputs() and run it on the "
                            f"meta device: {type(err).__name__}: {message}") from None
    return model, inputs, state, out if isinstance(out, tuple) else (out,), flops


def _identifiers(names: list[str], prefix: str, taken: set[str]) -> dict[str, str]:
    """A distinct Python identifier for each name (``prefix`` + its letters, digits and _)."""
    out = {}
    for name in names:
        ident = prefix + re.sub(r"\W", "_", name, flags=re.ASCII)
        while ident in taken:
            ident += "_"
        taken.add(ident)
        out[name] = ident
    return out


STARTER_MODULE = "_kernelbench_module.py"  # the module's copy the starter candidate loads


def import_module(path: Path, out_dir: Path, force: bool = False) -> tuple[Path, list[str]]:
    """Write ``out_dir/problem.yaml``, ``reference.py``, the module's copy and a starter candidate
    (``solutions/torch_eager.py``: the module's forward, to edit); return the file and notes. A folder
    that exists with files in it is refused unless ``force``."""
    model, inputs, state, outs, flops = _run_module(path)
    names = [f"x{i}" for i in range(len(inputs))]
    state_names = _identifiers(list(state), "p_", set(names))
    specs = {n: _spec(t) for n, t in zip(names, inputs, strict=True)} | {state_names[k]: _spec(t) for k, t in state.items()}
    notes = []
    if flops == 0:
        notes.append("FlopCounterMode counts no FLOPs in this module (elementwise or data movement): "
                     "flops is 0 until you write a formula; review it")
    floats = [s["dtype"] for s in specs.values() if s["shape"] is not None and s["dtype"].startswith(("float", "bfloat"))]
    dtype = floats[0] if floats else "float32"
    tol = 1e-4 if dtype == "float32" else 1e-2  # KernelBench's get_tolerance_for_precision
    stem = re.sub(r"^\d+_", "", path.stem)
    level = path.parent.name if path.parent.name.startswith("level") else None  # KernelBench's level1/ ...
    data = {
        "name": f"kernelbench.{slug(level) + '_' if level else ''}{slug(stem)}"[:128],
        "description": f"KernelBench {level + ' ' if level else ''}{path.stem}, imported from its module",
        "source": {"model": "KernelBench", "module": path.name, "note": "one fixed shape per problem (KernelBench)"},
        "tags": ["kernelbench", slug(level)] if level else ["kernelbench"],
        "axes": {}, "inputs": specs,
        "outputs": {f"out{i}": _spec(t) for i, t in enumerate(outs)},
        "reference": "reference.py:run", "flops": flops, "bytes": "auto", "compute_dtype": dtype,
        "tolerance": {"atol": tol, "rtol": tol},
        "workloads": [{"name": "default", "axes": {}}],
        "notes": " ".join(notes) or "flops counted with FlopCounterMode at import",
    }
    if out_dir.exists() and any(out_dir.iterdir()) and not force:
        raise ImportRefused(f"-o {out_dir}: the folder exists and is not empty; pass --force to write the problem "
                            "into it anyway (its problem.yaml, reference.py and starter candidate are replaced)")
    (out_dir / "solutions").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, out_dir / "kernelbench_module.py")
    shutil.copyfile(path, out_dir / "solutions" / STARTER_MODULE)  # "_": not a candidate itself
    code = {"file": path.name, "forward": names, "state": list(state), "args": ", ".join(specs)}
    (out_dir / "reference.py").write_text(_REFERENCE.format(title="Reference", more="", module="kernelbench_module.py",
                                                            **code), encoding="utf-8")
    (out_dir / "solutions" / "torch_eager.py").write_text(
        _REFERENCE.format(title="Starter candidate (the module's own forward)", module=STARTER_MODULE,
                          more="\n\nEdit run() into your kernel; `solbench run` on this folder checks and times it.",
                          **code), encoding="utf-8")
    problem_file = out_dir / "problem.yaml"
    problem_file.write_text(yaml.safe_dump(data, sort_keys=False, width=110), encoding="utf-8")
    return problem_file, notes
