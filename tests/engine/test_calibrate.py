"""`solbench calibrate` on the CPU for real (--quick), the spec it writes."""

import datetime as dt
import importlib.metadata
import platform
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from solbench.data.hardware import load_spec, load_spec_file
from solbench.engine.calibrate import _cpu_roof_peaks, build_spec, default_spec_id, slug

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
    assert (spec.kind, spec.device_type) == ("measured", "cpu")
    assert spec.id.startswith(f"cpu_quick_{slug(socket.gethostname())[:24]}_")  # the file's name, host, time
    # every dtype the library scores in is there (bf16 problems failed with "no peak for 'bfloat16'")
    library = {yaml.safe_load(f.read_text())["compute_dtype"] for f in (ROOT / "problems").rglob("problem.yaml")}
    assert library <= set(spec.peak_flops)
    m = spec.measured.model_dump()
    assert m["versions"]["torch"] and m["quick"] is True
    # One version collector for records and calibration: the installed distributions, read independently.
    for dist in ("numpy", "nvidia-ml-py", "triton"):
        try:
            assert m["versions"][dist] == importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            assert dist not in m["versions"]
    assert m["versions"]["python"] == platform.python_version()
    # The roof numbers are the measured ones, not something else: peaks = burst matmul rates, a
    # dtype slower than float32 (or without a matmul) at the float32 rate; bandwidth = the best copy
    # or read over the sizes tried.
    burst = m["burst_peak_flops"]
    for k, v in spec.peak_flops.items():
        assert v == pytest.approx(max(burst.get(k, 0.0), burst["float32"] if k != "float64" else 0.0))
        slower = k != "float64" and (k not in burst or burst[k] < burst["float32"])
        assert (k in m.get("no_fast_path", {})) == slower
    by_size = [v for kind in m["bandwidth_by_size"].values() for v in kind.values()]
    assert spec.memory_bandwidth == pytest.approx(max(by_size))
    assert str(out) in r.stdout.replace("\n", "")  # tells the user where it went and how to use it
    assert load_spec(out).id == spec.id  # usable as --gpu PATH


def test_cpu_calibrate_validates(cpu_spec):
    r = solbench("validate", str(cpu_spec[0]))
    assert r.returncode == 0, r.stderr


def test_bad_output_name_is_one_line(tmp_path):
    r = solbench("calibrate", "--quick", "--device", "cpu", "-o", str(tmp_path / "spec.json"))
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




def test_a_dtype_without_a_fast_path_gets_the_float32_roof():
    """bf16 at 1.3 GFLOP/s (a CPU without AVX512-BF16) would be beaten by any eager bf16 op, which
    computes in float32: its roof is the float32 rate, and the spec says why."""
    gemm = {"float32": {"burst": 126e9}, "float64": {"burst": 60e9}, "bfloat16": {"burst": 1.3e9},
            "float16": {"burst": 300e9}}
    peaks, notes = _cpu_roof_peaks(gemm)
    assert peaks["bfloat16"] == 126e9 and "1.3 GFLOP/s" in notes["bfloat16"]
    assert peaks["float16"] == 300e9 and "float16" not in notes  # a fast path keeps its own rate
    assert peaks["float64"] == 60e9  # float64 cannot be computed faster in float32
    assert peaks["float8_e4m3fn"] == peaks["int8"] == peaks["tf32"] == 126e9  # never dropped


def test_calibrated_ids_are_unique_per_host_and_time():
    m = {"device_type": "cpu", "device": "AMD EPYC"}
    t = dt.datetime(2026, 12, 1, 10, 0, 0, tzinfo=dt.timezone.utc)
    a, b = default_spec_id(m, now=t), default_spec_id(m, now=t + dt.timedelta(seconds=1))
    assert a != b and slug(socket.gethostname())[:24] in a and "20261201t100000" in a
    assert default_spec_id(m, "X", now=t).startswith("x_")


def test_a_copied_spec_loads_by_path_under_any_name(cpu_spec, tmp_path):
    copy = tmp_path / "my_copy.yaml"
    copy.write_text(cpu_spec[0].read_text())
    assert load_spec(copy).id == load_spec(cpu_spec[0]).id
    shipped = ROOT / "hardware_specs" / "h200_sxm.yaml"
    (tmp_path / "mine.yaml").write_text(shipped.read_text())
    assert load_spec(tmp_path / "mine.yaml").id == "h200_sxm"
