"""Correctness: pure functions on tensors, run in the parent.

An element passes when ``|out - ref| <= atol + rtol * |ref|`` (computed in float64: on the CPU for
small tensors, on the GPU for a CUDA reference of more elements; in float32 on the GPU for big
ones). On top of that:

* a NaN or Inf in the output never passes, unless the reference has the same non-finite value at
  that spot; the ``max_mismatch_ratio`` allowance never covers non-finite values;
* an all-zero output against a non-zero reference never passes, whatever the tolerance;
* integer and bool outputs must match exactly;
* an output must be exactly ``torch.Tensor`` (no subclass), on the expected device, with the
  declared shape and dtype (contiguous or not).

The output descriptions come from the worker (:mod:`solbench.worker.main`) and are untrusted data: a
malformed one raises :class:`MalformedReply`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from solbench.guards import same_bytes

# Above this many elements a CUDA reference is compared on the GPU in float32.
GPU_COMPARE_NUMEL = 1 << 22
# Above this many (up to the one above) on the GPU in float64: the same figures as the CPU's float64, without
# copying to the host and comparing there on the parent's cores (19% of its busy time on the H200, 2026-12-02).
DEVICE_FLOAT64_NUMEL = 1 << 16
# Compared this many elements at a time: a whole 1e9-element output's temporaries took ~40 GiB of the
# parent's device memory (H200, 2026-12-02: lm_head's training logits; the records beside it ran out).
COMPARE_CHUNK_NUMEL = 1 << 25


class MalformedReply(ValueError):
    """The worker's reply does not have the structure the protocol promises."""


@dataclass
class TensorComparison:
    passed: bool
    reason: str | None
    numel: int
    mismatches: int
    mismatch_ratio: float
    nonfinite_mismatches: int
    max_abs_err: float
    max_rel_err: float
    first_bad_index: list[int] | None = None
    first_bad_value: float | None = None
    first_bad_expected: float | None = None

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("max_abs_err", "max_rel_err"):
            if not math.isfinite(d[k]):
                d[k] = None if math.isnan(d[k]) else "inf"
        return d


def _unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    idx = []
    for s in reversed(shape):
        idx.append(flat % s)
        flat //= s
    return list(reversed(idx))


def _scalar(t: Any) -> float:
    v = float(t)
    return v if math.isfinite(v) else (float("nan") if math.isnan(v) else v)


def compare_tensors(out: Any, ref: Any, atol: float, rtol: float, max_mismatch_ratio: float = 0.0) -> TensorComparison:
    """Compare two tensors of the same shape and dtype elementwise (see the module docstring), in chunks of
    ``COMPARE_CHUNK_NUMEL`` elements: a comparison's temporaries are about ten times its chunk in float32."""
    if tuple(out.shape) != tuple(ref.shape) or out.dtype != ref.dtype:
        raise ValueError(f"compare_tensors needs equal shapes and dtypes: {tuple(out.shape)} {out.dtype} vs "
                         f"{tuple(ref.shape)} {ref.dtype}")
    numel = ref.numel()
    if numel == 0:
        return TensorComparison(True, None, 0, 0, 0.0, 0, 0.0, 0.0)
    flat_out, flat_ref = out.detach().reshape(-1), ref.detach().reshape(-1)
    place = _compare_place(ref, numel)  # the whole tensor's: every chunk is compared as the whole would be
    exact = not (ref.dtype.is_floating_point or ref.dtype.is_complex)
    # mismatches, non-finite ones, max |err|, max rel err, any non-zero reference, all-zero output
    totals = [0, 0, 0.0, 0.0, False, True]
    first = None  # the first mismatch: flat index, got, expected
    for at in range(0, numel, COMPARE_CHUNK_NUMEL):
        stats, bad = _compare_chunk(flat_out[at:at + COMPARE_CHUNK_NUMEL], flat_ref[at:at + COMPARE_CHUNK_NUMEL],
                                    place, exact, atol, rtol, locate=first is None)
        totals = [totals[0] + stats[0], totals[1] + stats[1], _max(totals[2], stats[2]), _max(totals[3], stats[3]),
                  totals[4] or stats[4], totals[5] and stats[5]]
        if bad is not None:
            first = (at + bad[0], bad[1], bad[2])
    return _comparison(totals, first, numel, exact, atol, rtol, max_mismatch_ratio, tuple(ref.shape))


def _max(a: float, b: float) -> float:
    """The larger, NaN if either is (as torch's max over the whole tensor would be)."""
    return math.nan if math.isnan(a) or math.isnan(b) else max(a, b)


def _compare_place(ref: Any, numel: int) -> tuple[Any, Any]:
    """Where and in which precision a comparison of ``numel`` elements of ``ref`` runs (the module docstring)."""
    import torch

    if ref.is_cuda and numel > GPU_COMPARE_NUMEL:
        return ref.device, torch.float32
    if ref.is_cuda and numel > DEVICE_FLOAT64_NUMEL:
        return ref.device, torch.float64
    return torch.device("cpu"), torch.float64


def _compare_chunk(out: Any, ref: Any, place: tuple[Any, Any], exact: bool, atol: float, rtol: float,
                   locate: bool) -> tuple[list[Any], tuple[int, float, float] | None]:
    """One chunk's figures, read back at once (float64: exact counts; one wait for the device, not one per
    figure), and where its first mismatch is when ``locate``; compared on ``place`` (device, dtype)."""
    import torch

    dev, dt = place
    o, r = out.to(dev).to(dt), ref.to(dev).to(dt)
    diff = (o - r).abs()
    fin_o, fin_r = torch.isfinite(o), torch.isfinite(r)
    same_nonfinite = ~fin_o & ((torch.isnan(o) & torch.isnan(r)) | (o == r))
    ok = (out.to(dev) == ref.to(dev)) if exact else (fin_o & fin_r & (diff <= atol + rtol * r.abs())) | same_nonfinite
    bad = ~ok
    err = torch.where(same_nonfinite, torch.zeros_like(diff), diff).nan_to_num(nan=math.inf)
    nz = r != 0
    rel = torch.where(nz, err / torch.where(nz, r.abs(), torch.ones_like(r)), torch.zeros_like(err))
    stats = torch.stack([t.to(torch.float64) for t in (bad.sum(), (~fin_o & ~same_nonfinite).sum(), err.max(),
                                                       rel.max(), nz.any(), (o == 0).all())]).tolist()
    stats = [int(stats[0]), int(stats[1]), stats[2], stats[3], bool(stats[4]), bool(stats[5])]
    if not (locate and stats[0]):
        return stats, None
    flat = int(torch.argmax(bad.to(torch.uint8)))
    return stats, (flat, _scalar(o[flat]), _scalar(r[flat]))


def _comparison(totals: list[Any], first: tuple[int, float, float] | None, numel: int, exact: bool, atol: float,
                rtol: float, max_mismatch_ratio: float, shape: tuple[int, ...]) -> TensorComparison:
    """The verdict and its figures from the chunks' totals."""
    mismatches, nonfinite_bad, max_abs, max_rel, any_nonzero, all_zero_out = totals
    max_rel = max_rel if any_nonzero else (0.0 if max_abs == 0 else math.inf)
    ratio = mismatches / numel
    reason = None
    if nonfinite_bad:
        reason = f"{nonfinite_bad} NaN/Inf value(s) where the reference is finite"
    elif mismatches and (ratio > max_mismatch_ratio or max_mismatch_ratio == 0):
        bound = "exact match" if exact else f"atol={atol:g} + rtol={rtol:g}*|ref|"
        reason = f"{mismatches} of {numel} elements ({ratio:.2%}) outside {bound}; max |out-ref| = {max_abs:.4g}"
    elif all_zero_out and any_nonzero:
        reason = "output is all zeros but the reference is not"
    result = TensorComparison(reason is None, reason, numel, mismatches, ratio, nonfinite_bad, max_abs, max_rel)
    if first is not None:
        result.first_bad_index = _unravel(first[0], shape)
        result.first_bad_value, result.first_bad_expected = first[1], first[2]
        if result.reason:
            result.reason += f"; first at {tuple(result.first_bad_index)}: got {result.first_bad_value:.6g}, " \
                             f"expected {result.first_bad_expected:.6g}"
    return result


@dataclass
class OutputsCheck:
    passed: bool
    reason: str | None
    comparisons: dict[str, TensorComparison]

    def as_dict(self) -> dict[str, Any]:
        return {name: c.as_dict() for name, c in self.comparisons.items()}


def _dtype_name(t: Any) -> str:
    return str(t.dtype).removeprefix("torch.")


def check_outputs(
    descs: Any,
    expected: dict[str, Any],
    device_type: str,
    atol: float | dict[str, float],
    rtol: float,
    max_mismatch_ratio: float = 0.0,
) -> OutputsCheck:
    """Check the worker's output descriptions against the reference outputs (name -> tensor, in order);
    ``atol`` may be given per output (the edge rounds scale it to each output's magnitude)."""
    import torch

    names = list(expected)
    if not isinstance(descs, list) or not all(isinstance(d, dict) for d in descs):
        raise MalformedReply("outputs must be a list of descriptions")
    if len(descs) != len(names):
        return OutputsCheck(False, f"run() returned {len(descs)} output(s); the problem declares {len(names)} "
                                   f"({', '.join(names)})", {})
    details: dict[str, TensorComparison] = {}
    for name, desc in zip(names, descs, strict=True):
        ref = expected[name]
        if desc.get("kind") != "tensor":
            return OutputsCheck(False, f"output {name!r} is a {desc.get('type', '?')}, not a torch.Tensor", details)
        if desc.get("exact") is not True:
            return OutputsCheck(False, f"output {name!r} is a {desc.get('type', '?')} (a torch.Tensor subclass); "
                                       "return a plain torch.Tensor", details)
        if desc.get("device") != device_type:
            return OutputsCheck(False, f"output {name!r} is on {desc.get('device')}, expected {device_type}", details)
        if desc.get("dtype") != _dtype_name(ref):
            return OutputsCheck(False, f"output {name!r} has dtype {desc.get('dtype')}, expected {_dtype_name(ref)}",
                                details)
        shape = desc.get("shape")
        if not isinstance(shape, list) or tuple(shape) != tuple(ref.shape):
            got = tuple(shape) if isinstance(shape, list) else shape
            return OutputsCheck(False, f"output {name!r} has shape {got}, expected {tuple(ref.shape)}", details)
        data = desc.get("data")
        if not isinstance(data, torch.Tensor) or tuple(data.shape) != tuple(ref.shape) or data.dtype != ref.dtype:
            raise MalformedReply(f"output {name!r}: the values do not match their description")
        cmp = compare_tensors(data, ref, atol[name] if isinstance(atol, dict) else atol, rtol, max_mismatch_ratio)
        details[name] = cmp
        if not cmp.passed:
            return OutputsCheck(False, f"output {name!r}: {cmp.reason}", details)
    return OutputsCheck(True, None, details)


def mutated_inputs(sent: dict[str, Any], after: Any, allowed: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Names of tensor inputs whose values changed during the call (``allowed`` ones excepted).

    The worker reports an input it found bitwise unchanged as ``{"kind": "unchanged"}`` instead of
    sending it back; any other entry is compared here with what was sent.
    """
    import torch

    names = list(sent)
    if not isinstance(after, list) or len(after) != len(names):
        raise MalformedReply("inputs_after must list every input")
    changed = []
    for name, before, now in zip(names, sent.values(), after, strict=True):
        if not isinstance(before, torch.Tensor) or name in allowed:
            continue
        if isinstance(now, dict) and now.get("kind") == "unchanged":
            continue
        if not isinstance(now, torch.Tensor) or not same_bytes(before, now):
            changed.append(name)
    return changed
