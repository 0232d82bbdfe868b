"""Nsight Compute's raw CSV export (``ncu --import R --page raw --csv``) read into per-kernel metrics.

The export has a header row of column names (identity columns such as ``ID``, ``Process ID``,
``Kernel Name``, then one column per metric, e.g. ``dram__bytes_read.sum``), a row of units
(``byte``, ``Mbyte``, ``nsecond``, ``%``...), then one row per profiled kernel. Values may be
scaled (``--print-units auto``, the default) and carry thousands separators; both are undone here,
so every metric comes back as a float in base units (bytes, seconds, cycles, percent).
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field

from solbench.errors import SolbenchError

IDENTITY_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
                    "Block Size", "Grid Size", "Device", "CC")
_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_TIME = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0, "ns": 1e-9, "us": 1e-6, "ms": 1e-3,
         "s": 1.0}
_SCALED = re.compile(r"^([KMGTP]?)(byte|cycle|inst|warp|thread|block|sector|request|wavefront|hz|Hz)$")


class NcuFormatError(SolbenchError):
    """Text that is not an Nsight Compute raw CSV export."""


@dataclass
class NcuKernel:
    """One profiled kernel launch: its identity columns as text, its metrics as floats in base units."""

    id: int
    process_id: int | None
    name: str
    info: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)

    def get(self, *names: str) -> float | None:
        """The first of ``names`` this kernel has (metric names differ between GPUs and ncu versions)."""
        return next((self.metrics[n] for n in names if n in self.metrics), None)


def unit_scale(unit: str) -> float:
    """The factor from ``unit`` to its base unit: 'Mbyte' -> 1e6, 'usecond' -> 1e-6, 'Gbyte/second' -> 1e9,
    'cycle/nsecond' -> 1e9; 1 for what is not scaled ('%', 'register/thread', '')."""
    unit = unit.strip()
    if "/" in unit:
        num, den = unit.split("/", 1)
        return unit_scale(num) / unit_scale(den)
    if unit in _TIME:
        return _TIME[unit]
    m = _SCALED.match(unit)
    return _PREFIX[m.group(1)] if m else 1.0


def parse_value(text: str, scale: float = 1.0) -> float | None:
    """A cell as a float times ``scale``: thousands separators removed; None for 'n/a', '' or text."""
    t = text.strip().replace(",", "")
    if not t or t.lower() in ("n/a", "nan", "-"):
        return None
    try:
        value = float(t)
    except ValueError:
        return None
    return value * scale if math.isfinite(value) else None


def _int(text: str | None) -> int | None:
    v = parse_value(text or "")
    return int(v) if v is not None else None


def _data_rows(text: str) -> list[list[str]]:
    """The CSV rows from the header on (ncu prints ``==PROF==`` lines and warnings before it)."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"') or ln.startswith("ID,")), None)
    if start is None:
        raise NcuFormatError("no header row starting with \"ID\": not an `ncu --page raw --csv` export")
    return list(csv.reader(io.StringIO("\n".join(lines[start:]))))


def parse_raw_csv(text: str) -> list[NcuKernel]:
    """Every kernel row of a raw CSV export, in the export's order."""
    rows = _data_rows(text)
    header = rows[0]
    has_units = len(rows) > 1 and not _is_kernel_row(rows[1])
    units = rows[1] if has_units else [""] * len(header)
    body = rows[2:] if has_units else rows[1:]
    scales = [unit_scale(u) for u in units]
    kernels = []
    for row in body:
        if len(row) != len(header):
            continue  # a trailing note line
        info = {h: v for h, v in zip(header, row, strict=True) if h in IDENTITY_COLUMNS}
        metrics = {}
        for h, v, s in zip(header, row, scales, strict=True):
            if h not in IDENTITY_COLUMNS:
                x = parse_value(v, s)
                if x is not None:
                    metrics[h] = x
        kernels.append(NcuKernel(id=_int(info.get("ID")) or len(kernels), process_id=_int(info.get("Process ID")),
                                 name=info.get("Kernel Name", "?"), info=info, metrics=metrics))
    return kernels


def _is_kernel_row(row: list[str]) -> bool:
    """The units row has an empty ID cell; a kernel row has a number there."""
    return bool(row) and parse_value(row[0]) is not None


def read_raw_csv(path: str) -> list[NcuKernel]:
    """:func:`parse_raw_csv` of a file (gzip-compressed when its name ends in .gz)."""
    import gzip

    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
        return parse_raw_csv(fh.read())
