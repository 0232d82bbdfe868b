"""In-stream clock probe and NVML clock helpers. Observe clocks, never change them.

A snapshot is a tiny kernel, launched on the timed stream, in which one thread per block reads
``%smid``, ``%globaltimer`` (ns) and ``clock64()`` (SM cycles) and stores them in the slot of its
SM. Two snapshots around a chunk of samples give, per SM, cycles / ns = the effective SM clock
over that chunk (nvbench's throttle detection does the same). Per-SM matching matters: clock64
counters of different SMs are not synchronised, so a before/after pair must come from one SM.

Backends: CuPy ``RawKernel`` with inline PTX (preferred), or Triton ``inline_asm_elementwise``.
Everything GPU-side is imported lazily.
"""

from __future__ import annotations

import functools
import statistics
import time
from typing import Any

from solbench.settings import COOLDOWN_MAX_S, COOLDOWN_POLL_S

LOW_CLOCK_FRACTION = 0.75  # nvbench's default throttle threshold

_CUDA_SRC = r"""
extern "C" __global__ void solbench_clock_snapshot(unsigned long long* out, int n_slots) {
    if (threadIdx.x != 0) return;
    unsigned int sm;
    unsigned long long t;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    long long c = clock64();
    if (sm < (unsigned int)n_slots) {
        out[3 * sm] = t;
        out[3 * sm + 1] = (unsigned long long)c;
        out[3 * sm + 2] = 1ULL;
    }
}

extern "C" __global__ void solbench_clock_spin(unsigned long long* out, unsigned long long spin_ns) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    unsigned long long t0, t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    long long c0 = clock64();
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    } while (t1 - t0 < spin_ns);
    long long c1 = clock64();
    out[0] = t1 - t0;
    out[1] = (unsigned long long)(c1 - c0);
}
"""

_triton_kernels: dict[str, Any] = {}


def _triton_snapshot_kernel() -> Any:
    # Triton resolves a kernel's names in its module's globals (not in enclosing functions), so
    # `tl` is bound as a global of this module here, lazily, to keep triton an optional import.
    global tl
    if "snapshot" not in _triton_kernels:
        import triton
        import triton.language as tl

        @triton.jit
        def _snapshot(out_ptr, n_slots):
            sm = tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
            t = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False,
                                          pack=1)
            c = tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)
            ok = sm < n_slots
            tl.store(out_ptr + 3 * sm, t, mask=ok)
            tl.store(out_ptr + 3 * sm + 1, c, mask=ok)
            tl.store(out_ptr + 3 * sm + 2, 1, mask=ok)

        _triton_kernels["snapshot"] = _snapshot
    return _triton_kernels["snapshot"]


class ClockProbe:
    """Snapshots of (globaltimer, clock64) per SM, launched on the current CUDA stream."""

    def __init__(self, device: Any = None, backend: str = "auto"):
        import torch

        self.torch = torch
        self.device = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
        props = torch.cuda.get_device_properties(self.device)
        self.n_sms = int(props.multi_processor_count)
        # Slots by %smid; SM ids can exceed the SM count on parts with disabled SMs.
        self.n_slots = 2 * self.n_sms + 64
        self.backend = self._pick_backend(backend)

    def _pick_backend(self, backend: str) -> str:
        errors = []
        for b in (("cupy", "triton") if backend == "auto" else (backend,)):
            try:
                if b == "cupy":
                    import cupy

                    mod = cupy.RawModule(code=_CUDA_SRC, options=("-std=c++11",))
                    self._cupy = cupy
                    self._cupy_snapshot = mod.get_function("solbench_clock_snapshot")
                    self._cupy_spin = mod.get_function("solbench_clock_spin")
                elif b == "triton":
                    _triton_snapshot_kernel()
                else:
                    raise ValueError(f"unknown clock probe backend {b!r} (cupy, triton)")
                self.backend = b
                self.rate_mhz(self.snapshot(), self.snapshot())  # compile, launch, read back once
                return b
            except Exception as err:  # noqa: BLE001 - try the next backend, report all reasons
                errors.append(f"{b}: {type(err).__name__}: {err}")
        raise RuntimeError("no clock probe backend works: " + "; ".join(errors))

    def _cupy_stream(self) -> Any:
        """CuPy's view of torch's current stream, so the probe is ordered with the timed work."""
        stream = self.torch.cuda.current_stream(self.device)
        return self._cupy.cuda.ExternalStream(stream.cuda_stream, self.device.index)

    def snapshot(self) -> Any:
        """Launch a snapshot on the current stream; returns its device buffer (CuPy or torch).

        The CuPy backend allocates with CuPy on the same stream: no DLPack hand-over needed.
        """
        grid = 4 * self.n_sms  # several blocks per SM so (almost) every SM writes its slot
        if self.backend == "cupy":
            cp = self._cupy
            with cp.cuda.Device(self.device.index), self._cupy_stream():
                buf = cp.zeros(3 * self.n_slots, dtype=cp.uint64)
                self._cupy_snapshot((grid,), (32,), (buf, cp.int32(self.n_slots)))
            return buf
        buf = self.torch.zeros(3 * self.n_slots, dtype=self.torch.int64, device=self.device)
        _triton_snapshot_kernel()[(grid,)](buf, self.n_slots, num_warps=1)
        return buf

    @staticmethod
    def rate_mhz(a: Any, b: Any) -> float | None:
        """Effective SM MHz between two snapshots (median over the SMs seen in both)."""
        rates = []
        for (ta, ca, oka), (tb, cb, okb) in zip(_rows(a), _rows(b), strict=True):
            if oka and okb and tb > ta and cb > ca:
                rates.append((cb - ca) / (tb - ta) * 1e3)
        return statistics.median(rates) if rates else None

    def spin_mhz(self, spin_us: float = 200.0) -> float:
        """Clock right now: one thread spins for `spin_us` of globaltimer time, counting cycles."""
        if self.backend == "cupy":
            cp = self._cupy
            with cp.cuda.Device(self.device.index), self._cupy_stream() as stream:
                out = cp.zeros(2, dtype=cp.uint64)
                self._cupy_spin((1,), (32,), (out, cp.uint64(int(spin_us * 1e3))))
                stream.synchronize()
            ns, cycles = (int(x) for x in out.get())
            return cycles / ns * 1e3
        # Triton: two snapshots around a torch sleep kernel on the same stream.
        a = self.snapshot()
        self.torch.cuda._sleep(int(spin_us * 1e3))  # ~spin_us at ~1 GHz; exact length does not matter
        b = self.snapshot()
        self.torch.cuda.synchronize(self.device)
        rate = self.rate_mhz(a, b)
        if rate is None:
            raise RuntimeError("clock probe saw no SM in both snapshots")
        return rate


def _rows(buf: Any) -> list[list[int]]:
    """A snapshot buffer (CuPy or torch, on the device) as host rows of (timer, clock, valid)."""
    host = buf.get() if hasattr(buf, "get") and not hasattr(buf, "cpu") else buf.cpu().numpy()
    return host.reshape(-1, 3).astype("int64").tolist()


def summarize_chunks(chunk_mhz: list[float | None], chunk_samples: list[int], max_mhz: float | None,
                     median_s: float) -> tuple[dict, list[str]]:
    """Clock summary of a timing run from per-chunk MHz, and its flags (``low_clock``)."""
    flags: list[str] = []
    seen = [(m, n) for m, n in zip(chunk_mhz, chunk_samples, strict=True) if m is not None]
    if not seen:
        return {"available": False, "reason": "no chunk had a valid clock reading"}, flags
    total = sum(n for _, n in seen)
    eff = sum(m * n for m, n in seen) / total if total else statistics.median(m for m, _ in seen)
    info: dict[str, Any] = {
        "available": True,
        "sm_mhz_effective": eff,
        "sm_mhz_min": min(m for m, _ in seen),
        "sm_mhz_max": max(m for m, _ in seen),
        "chunks_mhz": [None if m is None else round(m, 1) for m in chunk_mhz],
        "max_sm_mhz": max_mhz,
        "cycles_median": median_s * eff * 1e6,
    }
    if max_mhz:
        low = sum(n for m, n in seen if m < LOW_CLOCK_FRACTION * max_mhz)
        info["clock_ratio"] = eff / max_mhz
        info["low_clock_samples"] = low
        info["low_clock_fraction"] = low / total if total else 0.0
        # Time this median would take at the max clock, if it scales with the SM clock.
        info["median_s_at_max_clock"] = median_s * eff / max_mhz
        if eff < LOW_CLOCK_FRACTION * max_mhz or info["low_clock_fraction"] > 0.1:
            flags.append("low_clock")
    return info, flags


# --------------------------------------------------------------------------------------------
# NVML (nvidia-ml-py). Read only: never lock or change clocks or power limits.

_THROTTLE_BITS = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
}


@functools.cache
def init_nvml() -> Any:
    """The pynvml module, initialised once per process (every timing window asked again); raises where NVML
    is absent (no driver, no nvidia-ml-py), and is asked again next time then."""
    import pynvml

    pynvml.nvmlInit()
    return pynvml


@functools.cache
def nvml_handle(nvml: Any, uuid: str | None, index: int) -> Any:
    """The NVML handle of a CUDA device, looked up once per process: by UUID when known (CUDA and NVML order
    may differ)."""
    if uuid:
        try:
            return nvml.nvmlDeviceGetHandleByUUID(uuid)
        except Exception:  # noqa: BLE001 - fall back to the index
            pass
    return nvml.nvmlDeviceGetHandleByIndex(index)


def nvml_uuid(torch_uuid: object) -> str:
    """A device UUID as torch prints it, in NVML's form ('GPU-...')."""
    text = str(torch_uuid)
    return text if text.startswith("GPU-") else f"GPU-{text}"


def clocks_event_reasons(nvml: Any, handle: Any) -> int:
    """The device's current clocks-event (throttle) reason bits."""
    read = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    return int((read or nvml.nvmlDeviceGetCurrentClocksThrottleReasons)(handle))  # the older, deprecated name


def _torch_uuid(device_index: int) -> str | None:
    try:
        import torch

        return nvml_uuid(torch.cuda.get_device_properties(device_index).uuid)
    except Exception:  # noqa: BLE001 - UUID lookup is best effort; the index is the fallback
        return None


def _nvml_handle(device_index: int = 0) -> Any:
    pynvml = init_nvml()
    return pynvml, nvml_handle(pynvml, _torch_uuid(device_index), device_index)


def nvml_max_sm_mhz(device_index: int = 0) -> float | None:
    """The device's max SM clock from NVML, or None when NVML is unavailable."""
    try:
        pynvml, h = _nvml_handle(device_index)
        return float(pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM))
    except Exception:  # noqa: BLE001 - NVML absent or not supported: the caller records "unknown"
        return None


def nvml_state(device_index: int = 0) -> dict | None:
    """SM clock, power, power limit, temperature and throttle reasons, or None without NVML."""
    try:
        pynvml, h = _nvml_handle(device_index)
        reasons = clocks_event_reasons(pynvml, h)
        return {
            "sm_mhz": float(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)),
            "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1e3,
            "power_limit_w": pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1e3,
            "temperature_c": float(pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)),
            "reasons": reasons,
            "throttled": [name for bit, name in _THROTTLE_BITS.items() if reasons & bit],
        }
    except Exception:  # noqa: BLE001
        return None


def cooldown(max_wait_s: float = COOLDOWN_MAX_S, device_index: int = 0, power_fraction: float = 0.5,
             poll_s: float = COOLDOWN_POLL_S) -> dict:
    """Wait until the GPU has recovered from power/thermal throttling, at most `max_wait_s`.

    Recovered = no power/thermal throttle reason set and power draw below `power_fraction` of the
    enforced limit (NVML averages power over ~1 s on recent parts, so this also waits out the
    recent history). Used between interleaved candidates so power history does not pick the
    winner. Without NVML it sleeps a fixed short time and says so.
    """
    t0 = time.monotonic()
    first = nvml_state(device_index)
    if first is None:
        wait = min(max_wait_s, 0.5)
        time.sleep(wait)
        return {"available": False, "waited_s": wait, "recovered": None}
    state = first
    while True:
        recovered = not state["throttled"] and state["power_w"] < power_fraction * state["power_limit_w"]
        waited = time.monotonic() - t0
        if recovered or waited >= max_wait_s:
            return {"available": True, "waited_s": waited, "recovered": recovered, "before": first, "after": state}
        time.sleep(poll_s)
        state = nvml_state(device_index) or state
