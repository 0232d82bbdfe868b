"""Timer and checker integrity: were the functions that time and check replaced after the
candidate loaded?

The timing code binds its timers at import, so a patched ``time.perf_counter_ns`` does not change
what is measured; but a candidate that patches timers or checkers is trying to, and says so. The
snapshot (taken before the candidate is imported) holds each watched object and, for Python
functions, its code object; the check reports anything replaced, removed, or given new code,
including entries of whole modules (``solbench.timing`` and friends) and their classes' methods,
and the modules' identity in ``sys.modules``.
"""

from __future__ import annotations

import dis
import importlib
import inspect
import pkgutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import FunctionType, ModuleType
from typing import Any

from solbench.guards.findings import REWARD_HACK, Finding

# dotted attribute paths (module, attribute chain): timers, synchronisation, and the checkers.
WATCHED_ATTRIBUTES = (
    "time.perf_counter_ns", "time.perf_counter", "time.monotonic_ns", "time.monotonic", "time.time_ns",
    "time.time", "torch.cuda.Event", "torch.cuda.Event.record", "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.synchronize", "torch.cuda.Event.query", "torch.cuda.synchronize",
    "torch.cuda.current_stream", "torch.cuda.Stream.synchronize", "torch.cuda.Stream.wait_stream",
    "torch.allclose", "torch.isclose", "torch.equal", "torch.testing.assert_close",
    "torch.Tensor.untyped_storage", "torch.Tensor.data_ptr", "torch.Tensor.clone", "torch.Tensor.copy_",
    "torch.Tensor.to", "torch.Tensor.cpu", "torch.Tensor.detach", "torch.Tensor.__torch_function__",
    "gc.get_objects", "gc.collect",
)
# Packages whose every module is watched (its globals, and its classes' methods): the code that
# runs in the worker beside the candidate, and the settings it reads. By prefix, so a new module is
# covered without a list.
WATCHED_PACKAGES = ("solbench.worker", "solbench.timing", "solbench.guards", "solbench.settings")


def _in_watched(name: str, packages: Sequence[str] = WATCHED_PACKAGES) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def watched_modules(packages: Sequence[str] = WATCHED_PACKAGES) -> list[str]:
    """The loaded modules under the watched packages."""
    return sorted(n for n, m in list(sys.modules.items()) if isinstance(m, ModuleType) and _in_watched(n, packages))


def import_watched(packages: Sequence[str] = WATCHED_PACKAGES) -> None:
    """Import every module of the watched packages, so the snapshot sees them before the candidate.

    ``__main__`` entry modules are skipped: importing one would run it.
    """
    for pkg in packages:
        mod = importlib.import_module(pkg)
        for info in pkgutil.walk_packages(getattr(mod, "__path__", []), pkg + "."):
            if not info.name.endswith(".__main__"):
                importlib.import_module(info.name)


def _code(obj: Any) -> Any:
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    return obj.__code__ if isinstance(obj, FunctionType) else None


@dataclass
class IntegritySnapshot:
    """name -> (object, its code object or None); module name -> module object; name -> the watched module
    it is looked up in (the longest whose name prefixes it; none: resolved through ``sys.modules``)."""

    entries: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    modules: dict[str, ModuleType] = field(default_factory=dict)
    homes: dict[str, str] = field(default_factory=dict)


def _resolve(path: str) -> Any:
    parts = path.split(".")
    for i in range(len(parts) - 1, 0, -1):
        mod = sys.modules.get(".".join(parts[:i]))
        if mod is None:
            continue
        return _walk(mod, parts[i:])
    raise LookupError(path)


def _walk(obj: Any, attrs: Sequence[str]) -> Any:
    # On a class, the raw entry (getattr would build a new bound method for a classmethod).
    for attr in attrs:
        obj = inspect.getattr_static(obj, attr) if isinstance(obj, type) else getattr(obj, attr)
    return obj


def _codes(obj: Any) -> list[Any]:
    """Code objects of a module's functions and its classes' methods, nested ones included."""
    stack, out = [], []
    for value in vars(obj).values():
        if _code(value) is not None:
            stack.append(_code(value))
        elif isinstance(value, type) and value.__module__ == getattr(obj, "__name__", None):
            stack.extend(c for c in map(_code, vars(value).values()) if c is not None)
    while stack:
        code = stack.pop()
        out.append(code)
        stack.extend(c for c in code.co_consts if hasattr(c, "co_code"))
    return out


def _own_state(mod: ModuleType) -> set[str]:
    """Globals the module's own code rebinds (``global X; X = ...``): its state, not watched."""
    return {ins.argval for code in _codes(mod) for ins in dis.get_instructions(code) if ins.opname == "STORE_GLOBAL"}


def _module_entries(name: str, mod: ModuleType) -> dict[str, tuple[Any, Any]]:
    out = {}
    state = _own_state(mod)
    for key, value in list(vars(mod).items()):
        if key.startswith("__") or key in state:
            continue
        # Every global the module holds, imported ones too: `_perf_counter_ns = time.perf_counter_ns`
        # bound at import, or MIN_FLUSH_BYTES, is exactly what a candidate would swap.
        out[f"{name}.{key}"] = (value, _code(value))
        if isinstance(value, type) and getattr(value, "__module__", None) == mod.__name__:
                for mkey, mval in list(vars(value).items()):
                    if isinstance(mval, (FunctionType, staticmethod, classmethod)):
                        out[f"{name}.{key}.{mkey}"] = (mval, _code(mval))
    return out


def _worker_main_name() -> str | None:
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return "__main__" if spec is not None and _in_watched(getattr(spec, "name", None) or "") else None


def timer_integrity_snapshot(attributes: Sequence[str] = WATCHED_ATTRIBUTES,
                             modules: Sequence[str] | None = None) -> IntegritySnapshot:
    """Take it before any candidate code is imported. Names not loaded yet are skipped; ``modules``
    defaults to every loaded module of the watched packages."""
    snap = IntegritySnapshot()
    for path in attributes:
        try:
            obj = _resolve(path)
        except (LookupError, AttributeError):
            continue
        snap.entries[path] = (obj, _code(obj))
    names = watched_modules() if modules is None else list(modules)
    main = _worker_main_name()
    if main:
        names.append(main)
    for name in names:
        mod = sys.modules.get(name)
        if isinstance(mod, ModuleType):
            snap.modules[name] = mod
            snap.entries.update(_module_entries(name, mod))
    # Each entry's module found once here, not on every check (a sort per entry was ~7 us, 9 ms a check).
    by_length = sorted(snap.modules, key=len, reverse=True)
    for path in snap.entries:
        home = next((m for m in by_length if path.startswith(m + ".")), None)
        if home is not None:
            snap.homes[path] = home
    return snap


def _current(path: str, snap: IntegritySnapshot) -> Any:
    home = snap.homes.get(path)
    if home is not None:
        return _walk(snap.modules[home], path[len(home) + 1:].split("."))
    return _resolve(path)


def check_timer_integrity(snapshot: IntegritySnapshot) -> list[Finding]:
    """One REWARD_HACK finding listing every watched function replaced since the snapshot."""
    changed: list[str] = []
    for name, mod in snapshot.modules.items():
        if sys.modules.get(name) is not mod:
            changed.append(f"sys.modules[{name!r}]")
    for path, (obj, code) in snapshot.entries.items():
        try:
            now = _current(path, snapshot)
        except (LookupError, AttributeError):
            changed.append(f"{path} (removed)")
            continue
        if now is not obj:
            changed.append(path)
        elif code is not None and _code(now) is not code:
            changed.append(f"{path}.__code__")
    if not changed:
        return []
    shown = ", ".join(changed[:6]) + (f" and {len(changed) - 6} more" if len(changed) > 6 else "")
    return [Finding("integrity", REWARD_HACK,
                    f"the candidate replaced timing or checking code: {shown} (monkey-patching the harness)")]
