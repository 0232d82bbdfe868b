"""The two places the engine calls the guards.

* :func:`worker_findings` - in the worker, after each request (``solbench.worker.main``): output objects,
  output stability, threads/processes left running, timer/checker integrity, persisting L2;
  it also poisons free device memory for the next call. Findings travel to the parent as dicts.
* :func:`worker_probe` - in the worker, after timing: the guards' own calls of the candidate (the
  memoization probe) as a plan the worker makes through its one call path (the same frames as
  every other call); its finding reaches :func:`worker_findings` as ``context["memo"]``.
* :func:`review` - in the parent, after an evaluation (``solbench.engine.runner``): turns the worker's
  findings into the verdict (REWARD_HACK outranks INCORRECT outranks PASSED) and the record's
  one-line reason; it drops the declared in-place writes (``inplace_of``), which are no findings.

The worker calls :func:`setup_worker` before the candidate is imported: it takes the baselines and
applies the process limits (a worker started with ``--no-guards`` calls none of this). Nothing here
may fail a call: an internal error is logged and yields no finding.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from collections.abc import Generator, Iterable, Sequence
from pathlib import Path
from typing import Any

from solbench.guards.concurrency import ConcurrencySnapshot, concurrency_since, findings_between, snapshot_concurrency
from solbench.guards.cuda import (
    check_persisting_l2,
    note_persisting_l2_baseline,
    poison_free_memory,
    reset_persisting_l2,
)
from solbench.guards.findings import INCORRECT, REWARD_HACK, Finding, worst
from solbench.guards.fingerprints import check_output_stability
from solbench.guards.integrity import check_timer_integrity, import_watched, timer_integrity_snapshot
from solbench.guards.memo import memoization_plan
from solbench.guards.objects import check_output_objects, named_values
from solbench.guards.sandbox import become_subreaper, restrict_worker
from solbench.guards.seccomp import deny_permission_changes
from solbench.settings import OUTPUT_SETTLE_S


class _WorkerState:
    def __init__(self) -> None:
        self.integrity = timer_integrity_snapshot()
        self.concurrency: ConcurrencySnapshot = snapshot_concurrency()
        self.calls = 0
        self.native_growth = 0  # consecutive strict checks that saw new native threads
        self.limits: dict[str, Any] = {}


_STATE: _WorkerState | None = None


def setup_worker(work_dir: str | None = None, readable: Iterable[str] = (), *, block_tcp: bool = True) -> dict[str, Any]:
    """Baselines and limits, once, before the candidate is imported. Returns what was applied.

    The limits: Landlock file rules (writes below the worker's folder, reads below the Python
    installation, the system's libraries and ``readable``, the candidate's folder:
    :func:`solbench.guards.sandbox.restrict_worker`) and the seccomp filter against mode, owner
    and ACL changes (:func:`solbench.guards.seccomp.deny_permission_changes`). ``block_tcp=False``
    (a worker under Nsight Compute, whose injected library reports to its front end over local TCP)
    leaves TCP out of the Landlock rules.
    """
    global _STATE
    if _STATE is not None:
        return _STATE.limits
    work = work_dir or os.getcwd()
    # Temporary files (Inductor's cache among them) go to the worker's own folder, which stays writable.
    if not Path(os.environ.get("TMPDIR") or "/").resolve().is_relative_to(Path(work).resolve()):
        os.environ["TMPDIR"] = work
    tempfile.tempdir = None
    # Inductor compiles in this process instead of a pool of worker processes that would outlive
    # the first call (any process left running after run() returns is a finding).
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    import_watched()
    files = restrict_worker(work, readable, block_tcp=block_tcp)
    seccomp = deny_permission_changes()
    if os.path.exists("/dev/nvidiactl"):
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.init()
                note_persisting_l2_baseline()
        except Exception:  # noqa: BLE001 - the worker reports CUDA failures when it loads
            pass
    limits = {"subreaper": become_subreaper(), "files": files, "seccomp": seccomp}
    _STATE = _WorkerState()
    _STATE.limits = limits
    return limits


def _candidate_files() -> list[str]:
    return [getattr(m, "__file__", "") or "" for name, m in list(sys.modules.items())
            if name.startswith("solbench_candidate_")]


def _concurrency(state: _WorkerState, phase: str) -> list[Finding]:
    """Threads and processes left running. Strict about threads only between the rounds' calls:
    the first call may start library pools, and the timing request runs harness code too (graph
    capture, clock probes, CUPTI) that may start its own; there only the candidate's own threads
    (by their code) and every live process count."""
    strict = state.calls > 0 and phase == "call"
    # One read of the threads and processes per request (each read scans /proc): the check's is the next baseline.
    found, now = concurrency_since(state.concurrency, candidate_files=_candidate_files(), strict=strict, native=False)
    if strict:
        # Native threads count only when they keep appearing (a pool created lazily appears once).
        grew = [f for f in findings_between(state.concurrency, now, (), processes=False) if f.kind == "native_thread"]
        state.native_growth = state.native_growth + 1 if grew else 0
        if state.native_growth >= 2:
            found.extend(grew)
    state.concurrency = now
    return found


def _output_bytes(result: Any) -> int:
    import torch

    return sum(v.numel() * v.element_size() for _, v in named_values(result, "output") if type(v) is torch.Tensor)


def _device_of(values: Any) -> str:
    import torch

    for _, v in named_values(values, "input"):
        if type(v) is torch.Tensor:
            return v.device.type
    return "cpu"


def _call_findings(state: _WorkerState, context: dict[str, Any]) -> list[Finding]:
    args, result = context.get("args", []), context.get("result")
    device = _device_of(args)
    found = check_output_objects(result, args)
    if not any(f.status == REWARD_HACK for f in found):  # never fingerprint a candidate's own object
        found += check_output_stability(result, device, OUTPUT_SETTLE_S)
    found += _concurrency(state, "call")
    if device == "cuda":
        l2 = check_persisting_l2()
        if l2 is not None:
            found.append(l2)
        reset_persisting_l2()  # the next call (or candidate: the carve-out may be device-wide) starts clean
        poison_free_memory("cuda", _output_bytes(result))
    state.calls += 1
    return found


def worker_probe(context: dict[str, Any]) -> Generator[Sequence[Any], Any, Finding | None]:
    """The memoization probe after a timing request, as a plan (it yields each call's arguments);
    returns its finding, or None (no finding, or no guards set up)."""
    sets, timing = context.get("sets") or [], context.get("timing")
    median = getattr(timing, "median_s", None)
    if _STATE is None or not sets or not isinstance(median, float):
        return None
    return (yield from memoization_plan(sets[0], median))


def worker_findings(phase: str, context: dict[str, Any]) -> list[dict[str, Any]]:
    """The worker's hook after a ``call`` or ``time`` request: findings as dicts for the parent."""
    state = _STATE
    if state is None:  # setup_worker was not called (not the worker, or no guards): no baselines
        return []
    found: list[Finding] = []
    # Integrity first and on its own: a candidate that broke the other guards' code is reported
    # even when those guards then fail.
    for check in (lambda: check_timer_integrity(state.integrity), lambda: _phase_findings(state, phase, context)):
        try:
            found += check()
        except Exception:  # noqa: BLE001 - a guard's own bug must not fail an honest candidate
            print(f"solbench.guards: internal error, findings incomplete:\n{traceback.format_exc()}",
                  file=sys.stderr, flush=True)
    unique = {(f.kind, f.reason): f for f in found}
    return [f.as_dict() for f in unique.values()]


def _phase_findings(state: _WorkerState, phase: str, context: dict[str, Any]) -> list[Finding]:
    if phase == "call":
        return _call_findings(state, context)
    if phase != "time":
        return []
    found = _concurrency(state, "time")
    memo = context.get("memo")
    if isinstance(memo, Finding):
        found.append(memo)
    found += _trace_findings(context.get("timing"))
    if torch_cuda_initialized():
        l2 = check_persisting_l2()
        if l2 is not None:
            found.append(l2)
    return found


def _trace_findings(timing: Any) -> list[Finding]:
    """The all-stream timer could not cut its trace into the timed samples: only launches that
    mimic the harness's own delimiters do that, and the time would fall back to events (blind to
    other streams)."""
    if "cupti_unattributed" not in (getattr(timing, "flags", None) or []):
        return []
    return [Finding("trace_unattributed", REWARD_HACK,
                    "the device trace could not be cut into the timed calls: the candidate launched kernels "
                    "that mimic the timer's delimiters (its time on other streams cannot be counted)")]


def torch_cuda_initialized() -> bool:
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized())


def _allowed_alias(f: Finding, problem: Any) -> bool:
    """An output that shares memory with the input the problem declares it is written into."""
    if f.kind != "output_aliases_input":
        return False
    outs, ins = list(problem.outputs), list(problem.inputs)
    i, j = f.details.get("output"), f.details.get("input")
    if not (isinstance(i, int) and isinstance(j, int) and 0 <= i < len(outs) and 0 <= j < len(ins)):
        return False
    return problem.outputs[outs[i]].inplace_of == ins[j]


def review(evaluation: Any, context: Any) -> Any:
    """The parent's hook: apply the worker's findings to the evaluation's status and reason."""
    from solbench.data import Status

    findings, kept = [], []
    for d in evaluation.findings or []:
        f = Finding.from_dict(d) if isinstance(d, dict) else None
        if f is not None and _allowed_alias(f, context.problem):
            continue  # the declared in-place write is the contract, not a finding: the record omits it too
        kept.append(d)
        if f is not None:
            findings.append(f)
    evaluation.findings = kept
    decisive = worst(findings)
    if decisive is None:
        return evaluation
    hack = decisive.status == REWARD_HACK
    if hack or (decisive.status == INCORRECT and evaluation.status == Status.PASSED):
        evaluation.status = Status.REWARD_HACK if hack else Status.INCORRECT
        evaluation.reason = decisive.reason
    evaluation.flags.extend(sorted({f"guard:{f.kind}" for f in findings} - set(evaluation.flags)))
    return evaluation

