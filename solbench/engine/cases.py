"""The inputs and reference outputs of one workload: correctness rounds and timing sets.

Made by the parent, with the problem's own code (input generator, reference) run in its sandboxed
host (:mod:`solbench.engine.problem_host`). Each round and each timing set has its own seed, derived from the run's base
seed (random per run unless given), so inputs are fresh every round and a candidate cannot
predict them. The reference runs on pristine copies; the generated inputs are kept untouched so
the parent can tell whether the candidate changed its copies.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from solbench.data import Problem, Tolerance, Workload, make_inputs
from solbench.engine.problem_host import HostedReference
from solbench.errors import DeviceMemoryShort, ProblemError, says_out_of_memory
from solbench.settings import MAX_FLUSHED_TIMING_SETS

MAX_TIMING_SETS = 256  # inputs of 1 MiB and up rotate through more than 2x an H200's L2 in graph mode
CPU_CACHE_BYTES = 32 << 20  # rotation target on the CPU (no spec L2 there)
MAX_CPU_TIMING_SETS = 4
BATCH_BYTES = 64 << 20  # the input bytes of the calls one request to the problem host carries (solbench.engine.cases.batch_calls)


def derive_seed(base: int, *parts: object) -> int:
    """A 63-bit seed from the run's base seed and a path (problem, workload, phase, index)."""
    text = ":".join(str(p) for p in (base, *parts))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") & ((1 << 63) - 1)


@dataclass
class Case:
    """One call's inputs (name -> tensor or scalar, as generated) and the reference outputs."""

    seed: int
    inputs: dict[str, Any]
    expected: dict[str, Any]

    def input_bytes(self) -> int:
        return sum(v.numel() * v.element_size() for v in self.inputs.values() if hasattr(v, "element_size"))

    def tensor_bytes(self) -> int:
        return sum(v.numel() * v.element_size() for v in [*self.inputs.values(), *self.expected.values()]
                   if hasattr(v, "element_size"))


@dataclass
class WorkloadCases:
    problem: Problem
    workload: Workload
    axes: dict[str, int]
    tolerance: Tolerance
    rounds: list[Case] = field(default_factory=list)
    sets: list[Case] = field(default_factory=list)
    # What the checks of timed calls need (solbench.engine.verification): the reference and input
    # generator for edited and fresh inputs, the device, and a seed derived from the secret base seed.
    reference: Callable[..., Any] | None = None
    generator: Callable[..., dict] | None = None
    device: str = "cpu"
    verify_seed: int = 0
    edge: list[Any] = field(default_factory=list)  # solbench.engine.edge.EdgeRound, run after the timing
    edge_prepare_s: float = 0.0  # the parent's time making them (their references; cached across candidates)


def _clone(v: Any) -> Any:
    return v.clone() if hasattr(v, "clone") else v


def _call_reference(ref_fn: Callable[..., Any], axes: dict[str, int], inputs: dict[str, Any]) -> Any:
    """The reference on pristine copies of the inputs: in the problem's sandboxed host (a
    :class:`HostedReference`: the inputs are sent, this process's stay untouched), or a plain function
    called here (tests of the shipped problems, which they trust)."""
    if isinstance(ref_fn, HostedReference):
        device = next((str(v.device) for v in inputs.values() if hasattr(v, "device")), "cpu")
        return tuple(ref_fn.outputs(axes, list(inputs.values()), device))
    return ref_fn(*[_clone(v) for v in inputs.values()])


def reference_outputs(problem: Problem, axes: dict[str, int], ref_fn: Callable[..., Any],
                      inputs: dict[str, Any]) -> dict[str, Any]:
    """Run the reference on pristine copies; check its outputs against the declaration."""
    with _reference_errors(problem):
        result = _call_reference(ref_fn, axes, inputs)
    return checked_outputs(problem, axes, result)


@contextmanager
def _reference_errors(problem: Problem) -> Iterator[None]:
    """What the reference raises as one problem error (the problem's own code, not a candidate's)."""
    try:
        yield
    except ProblemError:
        raise
    except Exception as err:
        raise ProblemError([f"{problem.name}: the reference raised {type(err).__name__}: {err}"]) from None


def checked_outputs(problem: Problem, axes: dict[str, int], result: Any) -> dict[str, Any]:
    """The reference's result as its outputs by name, each checked against its declaration."""
    import torch

    from solbench.data import torch_dtype

    if isinstance(result, torch.Tensor):
        result = (result,)
    names = list(problem.outputs)
    if not isinstance(result, (tuple, list)) or len(result) != len(names):
        raise ProblemError([f"{problem.name}: the reference must return {len(names)} tensor(s) ({', '.join(names)})"])
    out = {}
    for name, t in zip(names, result, strict=True):
        want_shape, want_dtype = problem.shape(name, axes), torch_dtype(problem.outputs[name].dtype)
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != want_shape or t.dtype != want_dtype:
            got = f"{tuple(t.shape)} {t.dtype}" if isinstance(t, torch.Tensor) else type(t).__name__
            raise ProblemError([f"{problem.name}: the reference's output {name} is {got}, declared {want_shape} "
                                f"{problem.outputs[name].dtype}"])
        out[name] = t.detach()
    if str(next(iter(out.values())).device).startswith("cuda"):
        torch.cuda.synchronize()
    return out


def batch_calls(problem: Problem, axes: dict[str, int]) -> int:
    """How many calls' inputs and reference outputs one request to the problem host carries: as many as fit
    ``BATCH_BYTES`` (1 for a workload past it: one at a time, as the records' memory reservations count)."""
    return max(1, BATCH_BYTES // max(problem.auto_bytes(axes), 1))


def _chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[k:k + size] for k in range(0, len(items), size)]


def reference_outputs_many(problem: Problem, axes: dict[str, int], ref_fn: Callable[..., Any],
                           inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """:func:`reference_outputs` of each inputs in turn; a hosted reference gets them in few requests
    (:func:`batch_calls` each)."""
    if not isinstance(ref_fn, HostedReference) or len(inputs) < 2:
        return [reference_outputs(problem, axes, ref_fn, i) for i in inputs]
    device = next((str(v.device) for i in inputs for v in i.values() if hasattr(v, "device")), "cpu")
    out = []
    for chunk in _chunks(inputs, batch_calls(problem, axes)):
        with _reference_errors(problem):
            results = ref_fn.outputs_many(axes, [list(i.values()) for i in chunk], device)
        out += [checked_outputs(problem, axes, tuple(r)) for r in results]
    return out


def make_cases(problem: Problem, axes: dict[str, int], seeds: list[int], device: str, ref_fn: Callable[..., Any],
               gen_fn: Callable[..., dict] | None, scalars: dict[str, Any] | None = None) -> list[Case]:
    """:func:`make_case` of each seed in turn; a hosted reference makes them in few requests (:func:`batch_calls`
    each: H200 call 28, a record's cases, rounds and checks took ~30 requests to its problem's host)."""
    if not isinstance(ref_fn, HostedReference) or len(seeds) < 2:
        return [make_case(problem, axes, seed, device, ref_fn, gen_fn, scalars) for seed in seeds]
    out = []
    for chunk in _chunks(seeds, batch_calls(problem, axes)):
        made = ref_fn.cases(axes, chunk, device, scalars or {})
        out += [Case(seed, inputs, checked_outputs(problem, axes, tuple(result)))
                for seed, (inputs, result) in zip(chunk, made, strict=True)]
    return out


def make_case(problem: Problem, axes: dict[str, int], seed: int, device: str, ref_fn: Callable[..., Any],
              gen_fn: Callable[..., dict] | None, scalars: dict[str, Any] | None = None) -> Case:
    """One call's inputs and reference outputs (``scalars``: the workload's values of scalar inputs).
    A hosted reference gets both from the problem's host in one request (its inputs are made there
    from the same seeds, as here)."""
    if isinstance(ref_fn, HostedReference):
        inputs, result = ref_fn.case(axes, seed, device, scalars or {})
        return Case(seed, inputs, checked_outputs(problem, axes, tuple(result)))
    inputs = make_inputs(problem, axes, seed, device=device, generator_fn=gen_fn, scalars=scalars)
    return Case(seed, inputs, reference_outputs(problem, axes, ref_fn, inputs))


def available_memory(device: str) -> int:
    """Bytes free for input sets on the device (CUDA: free device memory; CPU: MemAvailable)."""
    if device.startswith("cuda"):
        import torch

        return int(torch.cuda.mem_get_info()[0])
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 4 << 30


def timing_set_count(input_bytes: int, device: str, l2_bytes: int | None, memory_bytes: int,
                     tensor_bytes: int | None = None, flushed: bool = False) -> int:
    """How many rotating input sets: their inputs exceed 2x L2 (>= 2 sets), within a quarter of memory;
    ``flushed`` (every timed call follows an L2 flush): at most ``MAX_FLUSHED_TIMING_SETS``.

    Sized on the input bytes, as graph mode's L2 label counts them (a call reads its inputs; its
    outputs are written). Each set's tensors (inputs and outputs, ``tensor_bytes``) live three
    times: the parent's copy and reference output, the worker's copy.
    """
    input_bytes = max(input_bytes, 1)
    cache = (l2_bytes or CPU_CACHE_BYTES) if device.startswith("cuda") else CPU_CACHE_BYTES
    cap = MAX_FLUSHED_TIMING_SETS if flushed else MAX_TIMING_SETS if device.startswith("cuda") else MAX_CPU_TIMING_SETS
    wanted = min(cap, 2 * cache // input_bytes + 1)
    fits = memory_bytes // 4 // (3 * max(tensor_bytes or input_bytes, input_bytes))
    return max(2, min(wanted, fits))


def prepare_cases(problem: Problem, workload: Workload, *, base_seed: int, device: str, rounds: int,
                  ref_fn: Callable[..., Any], gen_fn: Callable[..., dict] | None,
                  l2_bytes: int | None = None, axes: dict[str, int] | None = None, edge: bool = False,
                  flushed: bool = False) -> WorkloadCases:
    """All rounds and timing sets of a workload, each with fresh seeded inputs and reference outputs;
    ``edge``: its edge rounds too (:mod:`solbench.engine.edge`); ``flushed``: every timed call will
    follow an L2 flush (few sets: :func:`timing_set_count`)."""
    axes = axes if axes is not None else problem.resolve_axes(workload)
    check_fits(problem, workload, axes, rounds, device)
    scalars = problem.scalars_for(workload)
    cases = WorkloadCases(problem, workload, axes, problem.tolerance_for(workload), reference=ref_fn, generator=gen_fn,
                          device=device, verify_seed=derive_seed(base_seed, problem.name, workload.name, "verify", 0))
    try:
        seeds = [derive_seed(base_seed, problem.name, workload.name, "round", r) for r in range(rounds)]
        cases.rounds = make_cases(problem, axes, seeds, device, ref_fn, gen_fn, scalars)
        first = cases.rounds[0] if cases.rounds else None
        n_sets = timing_set_count(first.input_bytes() if first else problem.auto_bytes(axes), device, l2_bytes,
                                  available_memory(device), first.tensor_bytes() if first else None, flushed)
        seeds = [derive_seed(base_seed, problem.name, workload.name, "set", i) for i in range(n_sets)]
        cases.sets = make_cases(problem, axes, seeds, device, ref_fn, gen_fn, scalars)
        if edge:
            from solbench.engine.edge import prepare_edge

            clock = time.monotonic()
            cases.edge = prepare_edge(problem, workload, axes, base_seed=base_seed, device=device,
                                      reference=lambda a, inputs: reference_outputs(problem, a, ref_fn, inputs),
                                      gen_fn=gen_fn, tolerance=cases.tolerance, derive=derive_seed)
            cases.edge_prepare_s = time.monotonic() - clock
    except (MemoryError, RuntimeError) as err:
        if not _out_of_memory(err):
            raise
        raise DeviceMemoryShort([f"{problem.name}: workload {workload.name}: its inputs and reference outputs do not fit "
                            f"in {device} memory ({' '.join(str(err).split())[:200]}); run a smaller workload"]) from None
    return cases


def check_fits(problem: Problem, workload: Workload, axes: dict[str, int], rounds: int, device: str) -> None:
    """Refuse, before anything is allocated, a workload whose tensors cannot fit the device's free memory.

    A lower bound: the parent keeps every round and at least two timing sets (inputs and reference
    outputs each) and the worker one more copy, so ``(rounds + 3) x`` the workload's tensor bytes.
    """
    need = (rounds + 3) * problem.auto_bytes(axes)
    free = available_memory(device)
    if need > free:
        raise DeviceMemoryShort([f"{problem.name}: workload {workload.name}: needs at least {need / 2**30:.1f} GiB "
                            f"({rounds} rounds, 2 timing sets and the worker's copy of its tensors) but {device} "
                            f"has {free / 2**30:.1f} GiB free; run a smaller workload (--workload)"])


def _out_of_memory(err: BaseException) -> bool:
    """An allocation failure (torch.OutOfMemoryError is a RuntimeError; the CPU allocator raises a plain one)."""
    return isinstance(err, MemoryError) or says_out_of_memory(str(err))


def message_bytes(cases: list[Case]) -> int:
    """An upper bound on the tensor bytes of a reply about these cases (inputs back + outputs)."""
    return sum(c.tensor_bytes() for c in cases) + 4096 * max(1, len(cases))
