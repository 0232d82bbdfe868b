"""Output objects: exactly ``torch.Tensor``, with real storage of their own.

A candidate's return value is untrusted: a subclass or proxy can compute lazily inside the
checker (outside the timed window) or fake comparisons; an instance attribute can shadow a
Tensor method; a wrapper (functorch, zero tensor, meta) has no memory behind it; a view of an
input is the input. Nothing here calls a method of the candidate's objects: types are read with
``type()``, and Tensor methods are the ones bound when this module was imported (the worker
imports guards before the candidate), so a later patch of ``torch.Tensor`` does not change them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from solbench.guards.findings import INCORRECT, REWARD_HACK, Finding

_Tensor = torch.Tensor
_mro_of = type.__dict__["__mro__"].__get__
_instance_dict = torch.Tensor.__dict__["__dict__"].__get__
_untyped_storage = torch.Tensor.untyped_storage
_storage_ptr = torch.UntypedStorage.data_ptr
_storage_nbytes = torch.UntypedStorage.nbytes
_element_size = torch.Tensor.element_size
_storage_offset = torch.Tensor.storage_offset
_stride = torch.Tensor.stride
_size = torch.Tensor.size
_tensor_names = frozenset(dir(torch.Tensor))
_PROXY_HOOKS = ("__torch_function__", "__torch_dispatch__")


def _type_name(obj: Any) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}" if cls.__module__ != "builtins" else cls.__qualname__


def named_values(values: Any, prefix: str, names: Sequence[str] | None = None) -> list[tuple[str, Any]]:
    """(name, value) pairs from a mapping, an exact tuple/list, or a single value.

    Only exact ``dict``/``tuple``/``list`` types are iterated, so a candidate's container type
    cannot run code here.
    """
    if type(values) in (dict, OrderedDict):
        return [(str(k), v) for k, v in dict.items(values)]
    if type(values) in (tuple, list):
        items = list(values)
    else:
        items = [values]
    return [(names[i] if names is not None and i < len(names) else f"{prefix} {i}", v) for i, v in enumerate(items)]


def _byte_range(t: torch.Tensor) -> tuple[int, int] | None:
    """[start, end) of the bytes this tensor's storage spans, or None when it has none."""
    storage = _untyped_storage(t)
    ptr, nbytes = _storage_ptr(storage), _storage_nbytes(storage)
    return (ptr, ptr + nbytes) if ptr and nbytes else None


def _non_tensor_finding(name: str, obj: Any) -> Finding:
    cls = type(obj)
    if _Tensor in _mro_of(cls):
        return Finding("output_subclass", REWARD_HACK,
                       f"output '{name}' is a {_type_name(obj)}, a torch.Tensor subclass; outputs must be plain "
                       "torch.Tensor (a subclass can compute lazily or fake the comparison)")
    if any(hook in vars(k) for k in _mro_of(cls) for hook in _PROXY_HOOKS):
        return Finding("output_proxy", REWARD_HACK,
                       f"output '{name}' is a {_type_name(obj)} that intercepts torch calls (__torch_function__); "
                       "outputs must be plain torch.Tensor")
    return Finding("output_type", INCORRECT, f"output '{name}' is a {_type_name(obj)}, not a torch.Tensor")


def _tensor_findings(name: str, t: torch.Tensor) -> list[Finding]:
    shadowed = sorted(k for k in _instance_dict(t) if k in _tensor_names)
    if shadowed:
        return [Finding("output_overridden", REWARD_HACK,
                        f"output '{name}' overrides torch.Tensor attribute(s) {', '.join(shadowed)} on the instance; "
                        "outputs must be plain tensors")]
    if t.layout is not torch.strided or t.is_nested:
        return [Finding("output_layout", INCORRECT,
                        f"output '{name}' has layout {t.layout}; return a dense (strided) tensor")]
    try:
        span = _byte_range(t)
    except Exception as err:  # noqa: BLE001 - any failure to reach storage means there is none
        return [Finding("output_no_storage", REWARD_HACK,
                        f"output '{name}' has no real storage ({type(err).__name__}: {err}); it is a wrapper or lazy "
                        "tensor, not computed data")]
    numel = t.numel()
    if numel and span is None:
        return [Finding("output_no_storage", REWARD_HACK,
                        f"output '{name}' has {numel} elements but no memory behind them (device {t.device.type})")]
    if numel:
        extent = _storage_offset(t) + sum((s - 1) * st for s, st in zip(_size(t), _stride(t), strict=True) if s > 0)
        needed = (extent + 1) * _element_size(t)
        if span is not None and span[1] - span[0] < needed:
            return [Finding("output_storage", INCORRECT,
                            f"output '{name}' reaches {needed} bytes into a storage of {span[1] - span[0]}")]
    return []


def check_output_objects(
    outputs: Any,
    inputs: Any,
    inplace_of: Mapping[str, str] | None = None,
    output_names: Sequence[str] | None = None,
    input_names: Sequence[str] | None = None,
) -> list[Finding]:
    """Findings about what ``run`` returned (empty when every output is a plain tensor of its own).

    ``outputs``: what run() returned (a tensor, a tuple/list, or a name -> tensor dict);
    ``inputs``: the arguments it got (sequence or name -> value); ``inplace_of``: output name ->
    input name the problem lets it write in place (the only allowed sharing).
    """
    allowed = dict(inplace_of or {})
    spans: list[tuple[int, str, tuple[int, int]]] = []
    for j, (in_name, value) in enumerate(named_values(inputs, "input", input_names)):
        if type(value) is _Tensor and value.numel():
            try:
                span = _byte_range(value)
            except Exception:  # noqa: BLE001 - an input without storage cannot be aliased
                span = None
            if span is not None:
                spans.append((j, in_name, span))
    findings: list[Finding] = []
    for i, (name, out) in enumerate(named_values(outputs, "output", output_names)):
        if type(out) is not _Tensor:
            findings.append(_non_tensor_finding(name, out))
            continue
        own = _tensor_findings(name, out)
        findings.extend(own)
        if own or not out.numel():
            continue
        span = _byte_range(out)
        assert span is not None  # _tensor_findings returned nothing, so the storage is real
        for j, in_name, (lo, hi) in spans:
            if span[0] < hi and lo < span[1] and allowed.get(name) != in_name:
                findings.append(Finding("output_aliases_input", INCORRECT,
                                        f"output '{name}' shares memory with input '{in_name}' (a view or an in-place "
                                        "result); return a tensor of its own, or declare the output inplace_of "
                                        f"'{in_name}' in the problem", {"output": i, "input": j}))
    return findings
