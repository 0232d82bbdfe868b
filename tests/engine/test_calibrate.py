"""`solbench calibrate` on the CPU for real (--quick), the spec it writes."""

import importlib.metadata
import platform
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from solbench.data.hardware import load_spec, load_spec_file
from solbench.engine.calibrate import build_spec

ROOT = Path(__file__).resolve().parents[2]


def solbench(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "solbench", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def cpu_spec(tmp_path_factory):
    out = tmp_path_factory.mktemp("cal") / "cpu_quick.yaml"
    r = solbench("calibrate", "--quick", "--device", "cpu", "-o", str(out))
    assert r.returncode == 0, r.stderr
    return out, r


def test_cpu_calibrate_writes_a_spec_that_loads(cpu_spec):
    out, r = cpu_spec
    spec = load_spec_file(out)
    assert (spec.id, spec.kind, spec.device_type) == ("cpu_quick", "measured", "cpu")
    assert "float32" in spec.peak_flops
    m = spec.measured.model_dump()
    assert m["versions"]["torch"] and m["quick"] is True
    # One version collector for records and calibration: the installed distributions, read independently.
    for dist in ("numpy", "nvidia-ml-py", "triton"):
        try:
            assert m["versions"][dist] == importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            assert dist not in m["versions"]
    assert m["versions"]["python"] == platform.python_version()
    # The roof numbers are the measured ones, not something else: peaks = burst matmul rates,
    # bandwidth = the better of copy and read.
    for k, v in spec.peak_flops.items():
        assert v == pytest.approx(m["burst_peak_flops"][k])
    assert spec.memory_bandwidth == pytest.approx(max(m["bandwidth"]["copy"], m["bandwidth"]["read"]))
    assert str(out) in r.stdout.replace("\n", "")  # tells the user where it went and how to use it
    assert load_spec(out).id == "cpu_quick"  # usable as --gpu PATH


def test_cpu_calibrate_validates(cpu_spec):
    r = solbench("validate", str(cpu_spec[0]))
    assert r.returncode == 0, r.stderr


def test_bad_output_name_is_one_line(tmp_path):
    r = solbench("calibrate", "--quick", "--device", "cpu", "-o", str(tmp_path / "Bad Name.yaml"))
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def _fake_measurement(device="NVIDIA H200", bf16=780e12):
    return {
        "device": device, "device_type": "cuda", "gemm_n": 8192, "buffer_bytes": 2**31, "sustained_s": 6.0,
        "gemm": {"bfloat16": {"burst": bf16, "sustained": 667e12, "nvml_after": None},
                 "int8": {"burst": 916e12, "sustained": 800e12, "nvml_after": None},
                 "float32": {"burst": 0.5e9, "sustained": 0.4e9, "nvml_after": None}},  # below 1e9: dropped
        "gemm_skipped": {"float8_e4m3fn": "unsupported"},
        "bandwidth": {"copy": {"burst": 4.30e12, "sustained": 4.28e12}, "read": {"burst": 4.38e12, "sustained": 4.3e12},
                      "write": {"burst": 4.68e12, "sustained": 4.6e12}},
        "sm_count": 132, "l2_bytes": 62914560, "memory_bytes": 1.5e11, "boost_clock_mhz": 1980.0,
    }


def test_build_spec_from_known_numbers():
    d = build_spec(_fake_measurement(), "h200_sxm_measured", quick=False)
    assert d["based_on"] == "h200_sxm"
    assert d["peak_flops"] == {"bfloat16": 780e12, "int8": 916e12}
    assert d["memory_bandwidth"] == 4.38e12  # read beats copy; write (compressible) never counts
    assert d["measured"]["sustained_peak_flops"]["bfloat16"] == 667e12


def _write(folder: Path, spec_id: str, data: dict, timestamp: str) -> None:
    data = dict(data, id=spec_id)
    data["measured"] = dict(data["measured"], timestamp=timestamp)
    (folder / f"{spec_id}.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")


