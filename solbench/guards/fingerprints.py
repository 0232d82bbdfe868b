"""Fingerprints of tensors, to see whether a call changed them: inputs (mutation) and outputs
(still being written after ``run`` returned, by a side stream, a thread or a process).

On the CPU a fingerprint is a BLAKE2b hash of the bytes: exact. On a GPU copying every input to
the host would cost more than the call, so it is a device-side checksum instead: the plain and the
position-weighted sum of the 32-bit words (mod 2^64), plus 64 sampled words. Both include the
metadata (shape, strides, offset, dtype, device, address): ``set_()`` or ``resize_()`` on an
input is a change too.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from solbench.guards.findings import INCORRECT, REWARD_HACK, Finding
from solbench.guards.objects import named_values
from solbench.settings import OUTPUT_SETTLE_S

_CHUNK_WORDS = 1 << 24  # bounds the temporary int64 buffers of the device checksum (128 MiB)
_SAMPLES = 64
_WEIGHT_MOD = 65521  # largest prime below 2^16: position weights 1..65521


@dataclass(frozen=True)
class TensorPrint:
    meta: tuple[Any, ...]
    digest: tuple[Any, ...]


def _words(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes as 32-bit words (bytes widened to words when they do not divide)."""
    flat = t.detach().reshape(-1)
    if not flat.is_contiguous():
        flat = flat.contiguous()
    raw = flat.view(torch.uint8)
    if raw.numel() % 4 == 0:
        try:
            return raw.view(torch.int32)
        except RuntimeError:  # an offset that is not word-aligned
            return raw.contiguous().view(torch.int32)
    return raw.to(torch.int32)


def _device_digest(t: torch.Tensor) -> tuple[int, ...]:
    words = _words(t)
    n = words.numel()
    plain = torch.zeros((), dtype=torch.int64, device=words.device)
    weighted = torch.zeros((), dtype=torch.int64, device=words.device)
    for start in range(0, n, _CHUNK_WORDS):
        chunk = words[start:start + _CHUNK_WORDS].to(torch.int64)
        pos = torch.arange(start, start + chunk.numel(), device=words.device, dtype=torch.int64)
        plain += chunk.sum()
        weighted += (chunk * (pos % _WEIGHT_MOD + 1)).sum()
    k = min(n, _SAMPLES)
    # Integer arithmetic: float32 linspace rounds past n - 1 for n > 2**24 (a device-side assert on the H200).
    idx = torch.arange(k, device=words.device, dtype=torch.int64) * (n - 1) // max(k - 1, 1)
    return tuple(torch.cat([plain.view(1), weighted.view(1), words[idx].to(torch.int64)]).tolist())


def _host_digest(t: torch.Tensor) -> tuple[str]:
    flat = t.detach().reshape(-1).contiguous()
    return (hashlib.blake2b(flat.view(torch.uint8).numpy().tobytes(), digest_size=20).hexdigest(),)


def tensor_print(t: torch.Tensor) -> TensorPrint:
    meta = (tuple(t.shape), tuple(t.stride()), t.storage_offset(), str(t.dtype), str(t.device), t.data_ptr())
    if t.numel() == 0:
        return TensorPrint(meta, ())
    digest = _host_digest(t) if t.device.type == "cpu" else _device_digest(t)
    return TensorPrint(meta, digest)


def _prints(values: Any, prefix: str, names: Sequence[str] | None) -> dict[str, TensorPrint]:
    return {name: tensor_print(v) for name, v in named_values(values, prefix, names) if type(v) is torch.Tensor}


def input_fingerprints(inputs: Any, names: Sequence[str] | None = None) -> dict[str, TensorPrint]:
    """name -> fingerprint of every plain tensor among ``inputs`` (mapping, sequence or one tensor)."""
    return _prints(inputs, "input", names)


def changed(before: dict[str, TensorPrint], after: dict[str, TensorPrint]) -> list[str]:
    """Names whose fingerprint differs (or that disappeared)."""
    return [name for name, fp in before.items() if after.get(name) != fp]


def compare_fingerprints(before: dict[str, TensorPrint], after: dict[str, TensorPrint],
                         allowed: Collection[str] = ()) -> list[Finding]:
    """One INCORRECT finding per input the call changed, except those ``allowed`` (declared in place)."""
    findings = []
    for name in changed(before, after):
        if name in allowed:
            continue
        a, b = before[name], after.get(name)
        what = "values" if b is not None and a.meta == b.meta else "shape, strides or storage"
        findings.append(Finding("input_mutation", INCORRECT,
                                f"run() changed input '{name}' in place ({what}); inputs are read-only unless the "
                                "problem declares an output inplace_of them"))
    return findings


def synchronize_all(device: Any = None) -> None:
    """Wait for every stream of the device (``cudaDeviceSynchronize``), not only the current one."""
    if device is None or torch.device(device).type == "cuda":
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize(device)


def check_output_stability(outputs: Any, device: Any = None, settle_s: float = OUTPUT_SETTLE_S,
                           names: Sequence[str] | None = None) -> list[Finding]:
    """REWARD_HACK for each output that changes after ``run`` returned.

    Call it right after ``run`` returns, before any device-wide synchronisation: the first
    fingerprint is queued on the current stream (so it sees the current stream's work), then the
    whole device is drained and, after ``settle_s``, the outputs are fingerprinted again. Work
    left on another stream, or a thread or process still writing, shows up as a difference.
    """
    first = _prints(outputs, "output", names)
    synchronize_all(device)
    if settle_s > 0:
        time.sleep(settle_s)
    second = _prints(outputs, "output", names)
    return [Finding("output_changed_after_return", REWARD_HACK,
                    f"output '{name}' changed after run() returned: work was still running (another stream, a "
                    "thread or a process) when the call was timed as finished")
            for name in changed(first, second)]


def same_bytes(a: Any, b: Any) -> bool:
    """Bitwise equality (NaN-safe): same shape, dtype and bytes.

    Through ``torch.Tensor``'s own functions: the worker calls this on tensors the candidate has
    held, whose instance attributes may shadow any method.
    """
    import torch

    T = torch.Tensor
    if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
        return False
    if T.numel(a) == 0:
        return True
    av = T.view(T.contiguous(T.reshape(T.detach(a), -1)), torch.uint8)
    bv = T.view(T.contiguous(T.reshape(T.to(T.detach(b), a.device), -1)), torch.uint8)
    return torch.equal(av, bv)
