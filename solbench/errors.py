"""User-facing errors: one line that names the thing and the fix, never a traceback."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any


class SolbenchError(Exception):
    """An error a user can cause and fix (bad file, unknown GPU, missing candidate).

    The CLI prints ``str(err)`` on one line and exits non-zero.
    """


class ExpressionError(SolbenchError):
    """An expression in a problem file is not allowed or cannot be evaluated."""


def says_out_of_memory(text: str) -> bool:
    """Whether an error's text is an allocation failure: torch's ("CUDA out of memory"), the CUDA driver's
    (``CUDA_ERROR_OUT_OF_MEMORY``), cuBLAS's (``CUBLAS_STATUS_ALLOC_FAILED``: H200 call 23, a record made
    RUNTIME_ERROR by the device's memory running out beside others) or the CPU allocator's."""
    lower = text.lower()
    return any(s in lower for s in ("out of memory", "out_of_memory", "can't allocate memory", "alloc_failed"))


class ProblemError(SolbenchError):
    """A problem file is invalid. ``errors`` holds one line per problem found."""

    def __init__(self, errors: list[str]):
        self.errors = list(errors)
        super().__init__("; ".join(self.errors) if self.errors else "invalid problem")


class DeviceMemoryShort(ProblemError):
    """A workload's tensors do not fit the device's memory free now: beside other records in flight a
    retry may fit (the runner retries it as it does an allocation failure); alone, the device is too small."""


class SpecError(SolbenchError):
    """A hardware spec file is invalid or no spec matches."""

    def __init__(self, errors: list[str] | str):
        self.errors = [errors] if isinstance(errors, str) else list(errors)
        super().__init__("; ".join(self.errors))


def did_you_mean(name: object, known: Iterable[str]) -> str:
    """' (did you mean 'x'?)' for the closest known names to a mistyped one, else ''."""
    text, known = str(name), sorted(set(known))
    # A name cut short ("h200" for "h200_sxm") or given without its family ("rmsnorm"), then near misses.
    close = [k for k in known if k.startswith(text) or k.endswith("." + text)]
    close += [k for k in difflib.get_close_matches(text, known, n=3, cutoff=0.6) if k not in close]
    close = close[:3]
    return f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""


def error_message(error: dict[str, Any]) -> str:
    """One pydantic error's message without its "Value error, " / "Assertion failed, " prefix: the
    validator's own words."""
    msg = str(error.get("msg", ""))
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            return msg[len(prefix):]
    return msg


def validation_lines(err: Any, schema: str) -> list[str]:
    """'key.path: reason' for each error of a pydantic ValidationError, worded for YAML authors."""
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        msg = error_message(e)
        if e["type"] == "extra_forbidden":
            msg = f"unknown key (check the spelling; see `solbench schema {schema}`)"
        elif e["type"] == "missing":
            msg = "required key is missing"
        lines.append(f"{loc}: {msg}")
    return lines


# What Ctrl-C prints (the command line's entry point and its app say it alike), then exit 130.
INTERRUPTED = "interrupted (Ctrl-C): records already made stay in the results file"
