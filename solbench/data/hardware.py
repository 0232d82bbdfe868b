"""Hardware spec files (v1): one GPU (or a measured CPU) per YAML, dense peaks only.

A datasheet spec carries a source for each number. A measured spec (``kind: measured``, written
by ``solbench calibrate``) carries how, when and with which versions it was measured.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from solbench.data.cpu_estimate import CPU_ESTIMATE_ID, cpu_estimate_fields
from solbench.data.dtypes import PEAK_KEYS
from solbench.data.library import spec_dirs
from solbench.data.yamlio import checked_model, read_yaml_file
from solbench.errors import SpecError, did_you_mean

SPEC_ID = re.compile(r"[a-z0-9_\-]{1,64}")  # a spec's id: also what a record may name to be looked up (never a path)


def is_spec_id(text: object) -> bool:
    """Whether ``text`` is a spec id (lower-case letters, digits, _ and -, at most 64): safe to look up by name."""
    return isinstance(text, str) and SPEC_ID.fullmatch(text) is not None
NUMERIC_FIELDS = ("sm_count", "l2_bytes", "memory_bytes", "memory_bandwidth", "boost_clock_mhz", "l2_bandwidth",
                  "l1_bandwidth")
# The hierarchical roofline's levels: bandwidth field of each (HBM/DRAM, L2, L1), outermost first.
LEVEL_FIELDS = {"dram": "memory_bandwidth", "l2": "l2_bandwidth", "l1": "l1_bandwidth"}
# The launch floor: the least time solbench's timer reads for a call that does nothing, per timing
# method (``solbench calibrate`` measures it: a one-element fill, torch's smallest kernel).
LAUNCH_FLOOR_METHODS = ("events", "graph", "cpu")
# For CUDA specs that state none (every datasheet spec, and measured specs from before calibrate
# measured it): 1 us per method, under what the H200 probe read for a 4 KiB add (CUPTI kernel
# 0.80 us, graph batch 1.15-1.29 us, per-call events 2.3-4 us: docs/timing.md). Kept low on purpose:
# a floor set too high would lift a kernel's attainable SOL above what it earned.
DEFAULT_LAUNCH_FLOOR_S = {"events": 1.0e-6, "graph": 1.0e-6}


class Measurement(BaseModel):
    """How a measured spec was obtained (free-form beyond these keys)."""

    model_config = ConfigDict(extra="allow")
    method: str
    timestamp: str
    device: str
    versions: dict[str, str] = Field(default_factory=dict)


class HardwareSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str
    kind: Literal["datasheet", "measured"] = "datasheet"
    vendor: str = "NVIDIA"
    device_type: Literal["cuda", "rocm", "cpu"] = "cuda"
    match: list[str] = Field(default_factory=list)
    sm_count: int | None = Field(default=None, gt=0)
    l2_bytes: int | None = Field(default=None, gt=0)
    memory_bytes: float | None = Field(default=None, gt=0)
    memory_bandwidth: float = Field(gt=0, description="bytes/s")
    l2_bandwidth: float | None = Field(default=None, gt=0, description="L2 bytes/s, all SMs together (optional)")
    l1_bandwidth: float | None = Field(default=None, gt=0, description="L1/shared bytes/s summed over the SMs "
                                                                       "(optional)")
    boost_clock_mhz: float | None = Field(default=None, gt=0)
    clock_mhz_assumed: float | None = Field(default=None, gt=0, description="clock the tensor peaks assume")
    tdp_w: float | None = Field(default=None, gt=0)
    dense: bool = True
    peak_flops: dict[str, float]
    accumulate: dict[str, str] = Field(default_factory=dict, description="accumulate dtype per peak")
    sources: list[str] = Field(default_factory=list)
    provenance: dict[str, str] = Field(default_factory=dict, description="field -> where the number comes from")
    launch_floor_s: dict[str, float] = Field(
        default_factory=dict, description="timing method (events, graph, cpu) -> seconds an empty call reads; "
                                          "a number applies to events and graph")
    measured: Measurement | None = None
    based_on: str | None = Field(default=None, description="datasheet spec id a measured spec refines")
    notes: str = ""

    _path: Path | None = PrivateAttr(default=None)

    @field_validator("peak_flops")
    @classmethod
    def _peaks(cls, v: dict[str, float]) -> dict[str, float]:
        for k, x in v.items():
            if k not in PEAK_KEYS:
                raise ValueError(f"unknown peak key {k!r} (known: {', '.join(PEAK_KEYS)})")
            if not x > 0:
                raise ValueError(f"peak {k} must be positive FLOP/s, got {x}")
        if not v:
            raise ValueError("at least one peak is needed")
        return v

    @field_validator("launch_floor_s", mode="before")
    @classmethod
    def _floor(cls, v: Any) -> Any:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return {"events": v, "graph": v}
        return v

    @field_validator("launch_floor_s")
    @classmethod
    def _floor_keys(cls, v: dict[str, float]) -> dict[str, float]:
        for k, x in v.items():
            if k not in LAUNCH_FLOOR_METHODS:
                raise ValueError(f"unknown timing method {k!r} (known: {', '.join(LAUNCH_FLOOR_METHODS)})")
            if not 1e-9 <= x <= 1e-2:
                raise ValueError(f"{k}: {x:g} s is implausible for an empty call (write seconds, e.g. 2.0e-6)")
        return v

    def launch_floor(self, method: str | None) -> tuple[float, str] | None:
        """(seconds, basis) of the launch floor for a timing method: this spec's own number, else the
        documented default on CUDA (:data:`DEFAULT_LAUNCH_FLOOR_S`); None when neither applies."""
        if method in self.launch_floor_s:
            return self.launch_floor_s[method], f"{self.id}: launch_floor_s.{method}"
        if self.device_type == "cuda" and method in DEFAULT_LAUNCH_FLOOR_S:
            return DEFAULT_LAUNCH_FLOOR_S[method], f"default launch floor ({method}; {self.id} states none)"
        return None

    @property
    def path(self) -> Path | None:
        return self._path

    def peak(self, dtype: str) -> float:
        """Peak FLOP/s for a compute dtype; fp8 variants share a rate when only one is listed."""
        if dtype in self.peak_flops:
            return self.peak_flops[dtype]
        if dtype.startswith("float8") and any(k.startswith("float8") for k in self.peak_flops):
            return next(v for k, v in self.peak_flops.items() if k.startswith("float8"))
        have = ", ".join(self.peak_flops)
        raise SpecError(f"{self.id}: no peak for {dtype!r} (this spec has: {have}); add it to the spec file")

    def ridge_point(self, dtype: str) -> float:
        return self.peak(dtype) / self.memory_bandwidth

    def level_bandwidths(self) -> dict[str, float]:
        """Bytes/s of each memory level the spec states: dram always, l2 and l1 when given."""
        return {level: getattr(self, f) for level, f in LEVEL_FIELDS.items() if getattr(self, f) is not None}


def _spec_errors(spec: HardwareSpec, by_path: bool = False) -> list[str]:
    errs = []
    if not is_spec_id(spec.id):
        errs.append(f"id: {spec.id!r} must be 1 to 64 lower-case letters, digits, _ or -")
    if spec.kind == "datasheet" and not by_path and spec.path is not None and spec.path.stem != spec.id:
        errs.append(f"id: {spec.id!r} must equal the file name ({spec.path.stem}); a copy given by path "
                    "(--gpu FILE) may have any name")
    if not spec.dense:
        errs.append("dense: spec files hold dense (non-sparse) peaks only")
    if spec.kind == "datasheet":
        errs.extend(_source_errors(spec))
    elif spec.measured is None:
        errs.append("measured: a measured spec says how, when and on what it was measured")
    # Units: bandwidth in bytes/s, peaks in FLOP/s. Catches GB/s and TFLOP/s typed in.
    low = 1e6 if spec.kind == "measured" else 1e9  # a slow, busy CPU measures what it measures
    if not low <= spec.memory_bandwidth <= 1e14:
        errs.append(f"memory_bandwidth: {spec.memory_bandwidth:g} B/s is implausible (write bytes/s, e.g. 4.8e12)")
    errs.extend(_level_errors(spec))
    for k, v in spec.peak_flops.items():
        if not low <= v <= 1e17:
            errs.append(f"peak_flops.{k}: {v:g} FLOP/s is implausible (write FLOP/s, e.g. 989.4e12)")
    return errs


def _source_errors(spec: HardwareSpec) -> list[str]:
    """A datasheet spec names its sources, and a source for every number."""
    errs = [] if spec.sources else ["sources: a datasheet spec needs at least one source"]
    for f in NUMERIC_FIELDS:
        if getattr(spec, f) is not None and f not in spec.provenance:
            errs.append(f"provenance.{f}: every number needs a source")
    if spec.launch_floor_s and "launch_floor_s" not in spec.provenance:
        errs.append("provenance.launch_floor_s: every number needs a source")
    for k in spec.peak_flops:
        if f"peak_flops.{k}" not in spec.provenance and "peak_flops" not in spec.provenance:
            errs.append(f"provenance.peak_flops.{k}: every number needs a source")
    return errs


def _level_errors(spec: HardwareSpec) -> list[str]:
    """Cache bandwidths in bytes/s, each level at least as fast as the one outside it."""
    errs = []
    outer, outer_bw = "memory_bandwidth", spec.memory_bandwidth
    for field in ("l2_bandwidth", "l1_bandwidth"):
        bw = getattr(spec, field)
        if bw is None:
            continue
        if not 1e10 <= bw <= 1e15:
            errs.append(f"{field}: {bw:g} B/s is implausible (write bytes/s, e.g. 1.2e13)")
        elif bw < outer_bw:
            errs.append(f"{field}: {bw:g} B/s is below {outer} ({outer_bw:g} B/s); a cache level is faster "
                        "than the one outside it")
        outer, outer_bw = field, bw
    return errs


def spec_from_dict(data: dict[str, Any], path: Path | None = None, by_path: bool = False) -> HardwareSpec:
    """Build and fully check a spec from a mapping. Raises SpecError with 'file: key: why' lines.
    ``by_path``: the file was named by the user (``--gpu FILE``), so its name need not be its id."""
    return checked_model(HardwareSpec, data, path, "spec", SpecError, lambda spec: _spec_errors(spec, by_path))


def load_spec_file(path: str | Path, by_path: bool = False) -> HardwareSpec:
    """The spec in ``path``, parsed once per version of the file (its size and change time: an edited
    file is read anew). Specs are frozen, so one parse serves every caller: a run's verdicts look for
    the measured refinement of its spec at every record (H200 call 28: YAML parsing in the parent, under its
    GIL, at each record)."""
    path = Path(path)
    try:
        st = path.stat()
    except OSError:
        return spec_from_dict(read_yaml_file(path, SpecError), path, by_path)  # the reader names the fault
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, by_path)
    if key not in _PARSED:
        _PARSED[key] = spec_from_dict(read_yaml_file(path, SpecError), path, by_path)
    return _PARSED[key]


_PARSED: dict[tuple[str, int, int, bool], HardwareSpec] = {}  # load_spec_file's, by file version


def list_specs(spec_dir: str | Path | None = None) -> list[HardwareSpec]:
    """All specs found, first folder wins on duplicate ids."""
    seen: dict[str, HardwareSpec] = {}
    for d in spec_dirs(spec_dir):
        for f in sorted(Path(d).glob("*.yaml")) if Path(d).is_dir() else []:
            s = load_spec_file(f)
            seen.setdefault(s.id, s)
    return list(seen.values())


def load_spec(id_or_path: str | Path, spec_dir: str | Path | None = None) -> HardwareSpec:
    """A spec by id (``h200_sxm``, or ``cpu_estimate`` for the built-in CPU estimate) or by path to a YAML file."""
    p = Path(id_or_path)
    if p.suffix in (".yaml", ".yml") or p.is_file():
        if not p.is_file():
            raise SpecError(f"spec file {p} not found")
        return load_spec_file(p, by_path=True)
    for d in spec_dirs(spec_dir):
        f = Path(d) / f"{id_or_path}.yaml"
        if f.is_file():
            return load_spec_file(f)
    for s in _measured_specs(spec_dir):  # a calibrated spec's id need not be its file name
        if s.id == str(id_or_path):
            return s
    if str(id_or_path) == CPU_ESTIMATE_ID:
        return cpu_estimate_spec()
    ids = [s.id for s in list_specs(spec_dir)] + [CPU_ESTIMATE_ID]
    raise SpecError(f"unknown GPU {str(id_or_path)!r}{did_you_mean(id_or_path, ids)}: pick one of {', '.join(ids)} "
                    "(see `solbench specs`), or pass a spec file path")


def cpu_estimate_spec() -> HardwareSpec:
    """The built-in upper-bound roofline of this CPU (spec id ``cpu_estimate``; :mod:`solbench.data.cpu_estimate`)."""
    return HardwareSpec.model_validate(cpu_estimate_fields())


def load_spec_id(spec_id: str, spec_dir: str | Path | None = None) -> HardwareSpec:
    """A spec by id only, never by path: for a GPU named in a result record, which anyone may write
    (a record naming ``/etc/shadow`` must not get it opened, nor quoted in an error)."""
    if not is_spec_id(spec_id):
        shown = "".join(c if c.isprintable() else "?" for c in str(spec_id))[:40]
        raise SpecError(f"the records name GPU {shown!r}, which is not a spec id (letters, digits, _ and -): "
                        "pass --gpu ID (see `solbench specs`)")
    return load_spec(spec_id, spec_dir)


def detect_spec(device_name: str, spec_dir: str | Path | None = None) -> HardwareSpec:
    """The datasheet spec whose ``match`` strings fit the device name best (longest match wins)."""
    best: tuple[int, HardwareSpec] | None = None
    for s in list_specs(spec_dir):
        if s.kind != "datasheet":
            continue
        for m in s.match:
            if m.lower() in device_name.lower() and (best is None or len(m) > best[0]):
                best = (len(m), s)
    if best is None:
        raise SpecError(f"no spec matches device {device_name!r}: pass --gpu ID (see `solbench specs`) "
                        "or add a file to hardware_specs/ with a `match` entry for it")
    return best[1]


def measured_refinement(spec: HardwareSpec, spec_dir: str | Path | None = None) -> HardwareSpec | None:
    """The measured spec (``solbench calibrate``, under ``measured/`` of a spec folder) that refines a
    datasheet spec, newest first; the spec itself when it is measured; None when there is none."""
    if spec.kind == "measured":
        return spec
    mine = [s for s in _measured_specs(spec_dir) if s.kind == "measured" and s.based_on == spec.id]
    return max(mine, key=lambda s: s.measured.timestamp if s.measured else "", default=None)


def _measured_specs(spec_dir: str | Path | None = None) -> list[HardwareSpec]:
    """The calibrated specs under ``measured/`` of each spec folder."""
    return [load_spec_file(f) for d in spec_dirs(spec_dir) for f in sorted((Path(d) / "measured").glob("*.yaml"))]
