"""What a result was measured on: device, driver, library versions, host. Collected once per run."""

from __future__ import annotations

import os
import platform
import socket
import sys
from importlib import metadata
from typing import Any

from solbench._version import __version__
from solbench.data import cpu_count, cpu_model

_PACKAGES = ("torch", "triton", "cupy-cuda13x", "cupy-cuda12x", "cupy", "nvidia-ml-py", "numpy")


def package_versions() -> dict[str, str]:
    """Installed versions of the libraries candidates use (read from metadata: nothing is imported)."""
    out = {}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def cuda_device_info(index: int = 0) -> dict[str, Any]:
    """Name, UUID, SM count, L2 and memory of a CUDA device, from torch (and NVML for the driver)."""
    import torch

    from solbench.timing import nvml_uuid

    props = torch.cuda.get_device_properties(index)
    info: dict[str, Any] = {
        "gpu_name": props.name,
        "gpu_index": index,
        "gpu_count": torch.cuda.device_count(),
        "sm_count": props.multi_processor_count,
        "memory_bytes": props.total_memory,
        "compute_capability": f"{props.major}.{props.minor}",
    }
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        info["gpu_uuid"] = nvml_uuid(uuid)
    l2 = getattr(props, "L2_cache_size", None)
    if l2:
        info["l2_bytes"] = int(l2)
    info.update(_nvml_info(index, info.get("gpu_uuid")))
    return info


def driver_version() -> str | None:
    """The NVIDIA driver's version from NVML, or None where NVML is absent."""
    from solbench.timing import init_nvml

    try:
        driver = init_nvml().nvmlSystemGetDriverVersion()
    except Exception:  # noqa: BLE001 - NVML absent (CPU machines)
        return None
    return driver.decode() if isinstance(driver, bytes) else str(driver)


def _nvml_info(index: int, uuid: str | None) -> dict[str, Any]:
    """The driver, and where supported persistence mode, enforced power limit and MIG mode, from NVML."""
    from solbench.timing import init_nvml, nvml_handle

    try:
        nvml = init_nvml()
        handle = nvml_handle(nvml, uuid, index)
    except Exception as err:  # noqa: BLE001 - NVML absent: the rest still stands
        return {"driver": None, "nvml": f"unavailable ({type(err).__name__})"}
    info: dict[str, Any] = {"driver": driver_version()}
    for key, read in (("persistence_mode", nvml.nvmlDeviceGetPersistenceMode),
                      ("power_limit_w", lambda h: nvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0),
                      ("mig_mode", lambda h: nvml.nvmlDeviceGetMigMode(h)[0])):
        try:
            info[key] = read(handle)
        except Exception:  # noqa: BLE001 - optional details (MIG: not a MIG-capable part)
            pass
    return info


def collect_environment(device: str) -> dict[str, Any]:
    """The environment block of every record of a run."""
    env: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu_model": cpu_model(),
        "cpu_count": cpu_count(),
        "solbench": __version__,
        "packages": package_versions(),
        "device_type": "cuda" if device.startswith("cuda") else "cpu",
    }
    try:
        import torch

        env["torch"] = torch.__version__
        env["cuda"] = torch.version.cuda
        env["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
        if device.startswith("cuda"):
            env.update(cuda_device_info(torch.device(device).index or 0))
    except ImportError:
        pass
    env["triton"] = env["packages"].get("triton")
    env["cupy"] = next((v for k, v in env["packages"].items() if k.startswith("cupy")), None)
    return env


def device_name(device: str, env: dict[str, Any]) -> str:
    """The device as reported: the GPU name, or the CPU model."""
    return env.get("gpu_name") or env["cpu_model"] if device.startswith("cuda") else env["cpu_model"]
