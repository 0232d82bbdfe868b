"""Shapes compiled before a worker's first record: one untimed call on each workload's inputs.

Why: the timer's CUPTI trace (:mod:`solbench.timing.cupti`) leaves a worker the CUDA driver will not lock
(``cuCheckpointProcessLock``: code 801, NOT_SUPPORTED, once a process has been traced; Kineto's
``TEARDOWN_CUPTI=1`` does not undo it: H200, 2026-12-03, ``scripts/lock_probe.py``). A candidate that compiles
per shape (``torch.compile`` with static shapes, a Triton kernel specialised per size) compiled each new
workload's shape in that workload's first round, after its worker's first timing: a request no timing window
could lock, so every window of the run waited for the compile to end, and every other lane waited behind the
window (H200 call 24: during 50 of the 70 s a timing waited with no window held). Called on every later
workload's inputs while the worker has not been timed yet, it compiles them while another lane's window can
still lock it (call 25: a timing waited 0.28 s for its window at the median, 0.99 s before). The first
workload's shape too: compiled in its first round, it held that record's whole memory reservation meanwhile
(call 30: a tenth of the records' memory-seconds, in a pass bound by the device's memory).

Best effort, and nothing is judged from it: the outputs are not checked (the records' rounds do that, on
their own inputs), a workload whose inputs do not fit beside the records in flight now is left to its first
round, and a call that fails ends the warm-up with the worker retired (the record starts a fresh one and
says what failed).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from solbench.data import Problem, Workload
from solbench.engine.evaluation import expected_outputs
from solbench.worker import WorkerFailure

# A candidate that may compile per input shape names one of these (Triton's decorators and autotuner,
# torch.compile and the dynamo it drives, libraries of Triton or CuTe DSL kernels); so may a file beside it
# that it loads.
COMPILES_PER_SHAPE = re.compile(rb"torch\.compile|torch\._dynamo|\b(?:triton|liger_kernel|quack|cutlass|fla)\b")
SIBLING = re.compile(rb"load_sibling\([^,()]+,\s*[\"']([^\"']+)[\"']")
IMPORT = re.compile(rb"^\s*(?:from|import)\s+([A-Za-z_]\w*)", re.MULTILINE)
SOURCE_BYTES = 1 << 20  # read of each file: a candidate names its compiler near its top
REPLY_SLACK_BYTES = 1 << 16


def compiles_per_shape(path: str | Path) -> bool:
    """Whether a candidate file, or a file beside it that it loads (``solbench.load_sibling``, a plain import),
    may compile per input shape."""
    entry = Path(path)
    text = _head(entry)
    if COMPILES_PER_SHAPE.search(text):
        return True
    loaded = {m.decode() for m in SIBLING.findall(text)} | {m.decode() + ".py" for m in IMPORT.findall(text)}
    return any(COMPILES_PER_SHAPE.search(_head(entry.parent / name)) for name in sorted(loaded) if "/" not in name)


def _head(file: Path) -> bytes:
    try:
        with open(file, "rb") as fh:
            return fh.read(SOURCE_BYTES)
    except OSError:
        return b""


InputsFor = Callable[[Workload], AbstractContextManager[dict[str, Any] | None]]


def warm_shapes(slot: Any, problem: Problem, workloads: list[Workload], inputs_for: InputsFor,
                timeout_s: float, stop: threading.Event) -> list[str]:
    """One untimed call of the slot's loaded worker on each workload's inputs (``inputs_for(w)``: held while
    the call runs; None skips ``w``). Returns the workloads called; stops at the first failure (the worker
    retired) or when ``stop`` is set."""
    warmed: list[str] = []
    for workload in workloads:
        if stop.is_set():
            break
        with inputs_for(workload) as inputs:
            if inputs is None:
                continue
            if not _call(slot, problem, workload, inputs, timeout_s):
                break
        warmed.append(workload.name)
    return warmed


def _call(slot: Any, problem: Problem, workload: Workload, inputs: dict[str, Any], timeout_s: float) -> bool:
    """The call (its reply's outputs ignored); False, the worker retired, when it failed."""
    if slot.client is None:  # stopped meanwhile (the run's end)
        return False
    axes = problem.resolve_axes(workload)
    header = {"op": "call", "inputs": list(inputs.values()), "expect": expected_outputs(problem, axes)}
    reply_bytes = 2 * problem.auto_bytes(axes) + REPLY_SLACK_BYTES  # the outputs, and the inputs as left
    awaiting = slot.gate.awaiting_worker if slot.gate is not None else None
    try:
        with slot.access("warm", long=True):  # it may compile: long, and lockable (not timed yet)
            reply = slot.client.request(header, timeout_s, reply_bytes, awaiting)
    except WorkerFailure:
        reply = None
    if reply is None or reply.get("ok") is not True:
        slot.retire()  # a failed call may leave the worker poisoned (a CUDA error): the record starts afresh
        return False
    return True
