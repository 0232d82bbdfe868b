"""CUDA C++ candidates: a ``.cu`` file compiled with torch's C++ extension tools, once per content hash.

The entry point (documented in README "The candidate file"): the file defines a host function
``run`` taking and returning ``torch::Tensor`` (scalars as ``double`` / ``int64_t``) and exposes it
with ``PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }``; an optional ``setup``
is exposed the same way. The extension's name is ``solbench_cu_<first 16 hex of the source's
sha256>``, so torch's build folder (``$TORCH_EXTENSIONS_DIR``, which the parent points into the
worker's own folder) holds one build per content: the worker compiles on its first workload and
reuses the build on the next ones. Builds are not shared between workers on purpose: a JIT cache
that two candidates write lets one plant a binary under another's key (``worker/client.py``).
A build failure is a load error whose message is nvcc's (or the host compiler's) first error line.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from types import ModuleType

# "file.cu(12): error: ..." (nvcc), "file.cu:12:3: error: ..." (gcc/clang), "fatal error: ..."
_ERROR_LINE = re.compile(r"(?:^|\s)(?:fatal )?error(?: [A-Z]?\d+)?\s*:", re.IGNORECASE)
_NOISE = re.compile(r"^(ninja: build stopped|FAILED:|\[\d+/\d+\])")


def extension_name(source: bytes) -> str:
    """The extension's module name: one per content (a changed file is a new build)."""
    return f"solbench_cu_{hashlib.sha256(source).hexdigest()[:16]}"


def first_error_line(build_output: str) -> str:
    """The compiler's first error line in a build log (paths reduced to file names), or the log's
    first meaningful line when no line says ``error``."""
    lines = [ln.strip() for ln in build_output.splitlines() if ln.strip() and not _NOISE.match(ln.strip())]
    for line in lines:
        if _ERROR_LINE.search(line):
            return _short_paths(line)[:500]
    return _short_paths(lines[0])[:500] if lines else "the build failed with no output"


def _short_paths(line: str) -> str:
    """``<build folder>/kernel.cu(3): error`` -> ``kernel.cu(3): error``: no host path in a record."""
    return re.sub(r"(?:/[^\s/:()]+)+/([^\s/:()]+)", r"\1", line)


class CudaBuildError(Exception):
    """The ``.cu`` file did not compile or link; ``str()`` is the first error line."""

    def __init__(self, line: str, log: str):
        super().__init__(line)
        self.log = log


def build_cuda_candidate(path: Path) -> ModuleType:
    """Compile (or reuse this worker's build of) a ``.cu`` file; return the extension module."""
    source = path.read_bytes()
    try:
        from torch.utils.cpp_extension import load
    except ImportError as err:  # torch without its C++ extension tools
        raise CudaBuildError(f"torch.utils.cpp_extension is not available: {err}", "") from None
    try:
        return load(name=extension_name(source), sources=[str(path)], extra_cuda_cflags=["-O3"], verbose=False)
    except (RuntimeError, OSError, ImportError) as err:
        log = str(err)
        raise CudaBuildError(first_error_line(_build_text(log)), log) from None


def _build_text(message: str) -> str:
    """torch's 'Error building extension 'x': <ninja output>' -> the ninja output; other errors as they are."""
    head, sep, tail = message.partition("': ")
    return tail if sep and head.startswith("Error building extension") else message
