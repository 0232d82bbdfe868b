"""A FlashInfer-Trace / SOL-ExecBench Solution (.json with sources) -> a solbench candidate file.

Python and Triton sources are written next to each other under ``solutions/<name>/`` with a
``solbench_<name>.py`` wrapper whose ``run`` calls the entry point; in destination-passing style
(outputs appended after the inputs), the wrapper allocates the outputs from the problem's declared
shapes, resolved from the input shapes. A CUDA solution of one ``.cu`` file exposing ``run`` is
written as a ``.cu`` candidate; other layouts are refused in one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from solbench.data.interop.flashinfer_trace import ImportRefused, read_json, slug

_PYTHON = {"python", "pytorch", "triton", "cute_dsl", "cutile", "cudnn_frontend"}
_WRAPPER = '''"""solbench wrapper of a Solution (SOLUTION, entry point ENTRY_POINT)."""

import solbench

SOLUTION = {name!r}
ENTRY_POINT = {entry!r}
_entry = getattr(solbench.load_sibling(__file__, {sibling!r}), {func!r})
DPS = {dps!r}


def run(*inputs):
    if not DPS:
        return _entry(*inputs)
    outputs = solbench_outputs(inputs)
    _entry(*inputs, *outputs)
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def solbench_outputs(inputs):
    """The declared outputs, sized from the axis values the inputs' shapes give."""
    import torch

    sizes = {{}}
    for shape, tensor in zip({input_shapes!r}, inputs):
        for axis, size in zip(shape or (), getattr(tensor, "shape", ())):
            sizes[axis] = int(size)
    device = next(t.device for t in inputs if hasattr(t, "device"))
    return [torch.empty([sizes[a] for a in shape], dtype=getattr(torch, dtype), device=device)
            for shape, dtype in {outputs!r}]
'''


def _sources(sol: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for src in sol.get("sources", []):
        rel = str(src.get("path", ""))
        if not rel or Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise ImportRefused(f"solution {sol.get('name')}: source path {rel!r} must be relative, without '..'")
        out.append((rel, str(src.get("content", ""))))
    return out


def import_solution(path: Path, dest: Path, definition: dict[str, Any] | None = None) -> Path:
    """Write the candidate under ``dest``; return the file ``solbench run --solution`` takes."""
    sol = read_json(path, "solution")
    spec, name = sol.get("spec") or {}, slug(str(sol.get("name") or path.stem))
    langs = {str(x) for x in spec.get("languages") or [spec.get("language", "python")]}
    sources = _sources(sol)
    file, _, func = str(spec.get("entry_point", "")).partition("::")
    if langs <= {"cuda_cpp", "cuda", "cpp"} and len(sources) == 1 and sources[0][0].endswith(".cu"):
        dest.mkdir(parents=True, exist_ok=True)
        (dest / f"{name}.cu").write_text(sources[0][1], encoding="utf-8")
        return dest / f"{name}.cu"
    if not langs <= _PYTHON or not func:
        raise ImportRefused(f"solution {name}: languages {sorted(langs)} with {len(sources)} source(s): solbench "
                            "takes Python/Triton sources with an entry point 'file.py::function', or one .cu file")
    for rel, content in sources:
        target = dest / name / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    problem = definition or {}
    wrapper = _WRAPPER.format(name=name, entry=str(spec.get("entry_point")), sibling=f"{name}/{file}", func=func,
                              dps=bool(spec.get("destination_passing_style", True)),
                              input_shapes=[t.get("shape") for t in problem.get("inputs", {}).values()],
                              outputs=[(t.get("shape"), t.get("dtype")) for t in problem.get("outputs", {}).values()])
    out = dest / f"solbench_{name}.py"
    out.write_text(wrapper, encoding="utf-8")
    return out
