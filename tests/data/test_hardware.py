"""Spec files: every shipped spec loads, and its numbers obey the relations datasheets imply.

These relations catch the known traps: sparse numbers copied as dense, GB/s typed as B/s,
one GPU's bandwidth pasted into another's file.
"""

import pytest
import yaml

from solbench.data.hardware import detect_spec, list_specs, load_spec, load_spec_file
from solbench.data.library import SHIPPED_SPECS as SPEC_DIR
from solbench.errors import SpecError

REQUIRED = ["h100_sxm", "h100_pcie", "h200_sxm", "h200_nvl", "a100_sxm_80gb", "a100_pcie_40gb", "b200",
            "l40s", "l4", "a10g", "rtx_4090", "rtx_5090", "mi300x"]
SPECS = {s.id: s for s in list_specs() if s.kind == "datasheet"}


def test_required_specs_exist():
    assert set(REQUIRED) <= set(SPECS)


@pytest.mark.parametrize("sid", REQUIRED)
def test_units_and_ridge_are_plausible(sid):
    s = SPECS[sid]
    assert 2e11 <= s.memory_bandwidth <= 1e13  # 0.2 .. 10 TB/s
    assert 1e10 <= s.memory_bytes <= 3e11
    assert 1e6 <= s.l2_bytes <= 3e8
    assert 20 <= s.sm_count <= 400
    assert 1000 <= s.boost_clock_mhz <= 3000
    ridge = s.ridge_point("bfloat16")
    assert 50 <= ridge <= 600, ridge  # FLOP/byte where bf16 GEMMs turn compute-bound


@pytest.mark.parametrize("sid", REQUIRED)
def test_tensor_rate_ratios(sid):
    s = SPECS[sid]
    p = s.peak_flops
    assert p["float16"] == p["bfloat16"]
    # TF32 runs at half the 16-bit rate (GeForce: FP32-accumulate rate, same ratio)
    # (datasheets round: B200 prints 1.1 PF tf32 against 2.25 PF bf16, L40S 733 fp8 against 362)
    assert p["tf32"] == pytest.approx(p["bfloat16"] / 2, rel=0.03)
    if "float8_e4m3fn" in p:
        assert p["float8_e4m3fn"] == pytest.approx(2 * p["bfloat16"], rel=0.015)
    if "float64" in p and s.vendor == "NVIDIA":
        assert p["float64"] <= p["float32"]


@pytest.mark.parametrize("sid", ["h100_sxm", "h200_sxm"])
def test_hopper_numbers(sid):
    p = SPECS[sid].peak_flops
    assert p["bfloat16"] == 989.4e12  # dense; the datasheet's 1979 is with sparsity
    assert p["float8_e4m3fn"] == pytest.approx(2 * p["bfloat16"], rel=1e-3)  # 1979 vs 2 x 989.4
    assert p["int8"] == p["float8_e4m3fn"]
    # peak = SMs x assumed clock x 4096 FLOP/clk/SM (dense bf16 on Hopper)
    s = SPECS[sid]
    assert s.sm_count * s.clock_mhz_assumed * 1e6 * 4096 == pytest.approx(p["bfloat16"], rel=0.001)


def test_bandwidths_are_not_copies():
    bw = {sid: SPECS[sid].memory_bandwidth for sid in REQUIRED}
    assert bw["l4"] == 300e9 and bw["h100_sxm"] == 3.35e12 and bw["h200_sxm"] == 4.8e12
    assert bw["rtx_5090"] == 1.792e12 and bw["a100_sxm_80gb"] == 2.039e12


@pytest.mark.parametrize("sid", REQUIRED)
def test_every_number_has_a_source(sid):
    s = SPECS[sid]
    assert s.sources and s.dense
    for f in ("sm_count", "l2_bytes", "memory_bytes", "memory_bandwidth", "boost_clock_mhz", "peak_flops"):
        assert s.provenance.get(f), f


@pytest.mark.parametrize(
    ("device", "expected"),
    [("NVIDIA H200", "h200_sxm"), ("NVIDIA H200 NVL", "h200_nvl"), ("NVIDIA H100 80GB HBM3", "h100_sxm"),
     ("NVIDIA H100 PCIe", "h100_pcie"), ("NVIDIA A100-SXM4-80GB", "a100_sxm_80gb"),
     ("NVIDIA A100-PCIE-40GB", "a100_pcie_40gb"), ("NVIDIA L4", "l4"), ("NVIDIA L40S", "l40s"),
     ("NVIDIA GeForce RTX 4090", "rtx_4090"), ("NVIDIA B200", "b200"), ("AMD Instinct MI300X", "mi300x")],
)
def test_detect_by_device_name(device, expected):
    assert detect_spec(device).id == expected


def test_unknown_gpu_errors_name_the_fix():
    with pytest.raises(SpecError, match="unknown GPU 'h900'.*solbench specs"):
        load_spec("h900")
    with pytest.raises(SpecError, match="no spec matches device 'Voodoo 5'.*--gpu"):
        detect_spec("Voodoo 5")


def _spec_dict():
    return yaml.safe_load((SPEC_DIR / "h200_sxm.yaml").read_text())


@pytest.mark.parametrize(
    ("mutate", "expect"),
    [
        (lambda d: d.update(memory_bandwidth=4800.0), "memory_bandwidth"),  # GB/s typed as B/s
        (lambda d: d["peak_flops"].update(bfloat16=989.4), "peak_flops.bfloat16"),  # TFLOP/s typed
        (lambda d: d["peak_flops"].update(fp4=1.0), "unknown peak key"),
        (lambda d: d["provenance"].pop("memory_bandwidth"), "provenance.memory_bandwidth"),
        (lambda d: d.update(dense=False), "dense"),
        (lambda d: d.update(id="other"), "must equal the file name"),
    ],
)
def test_bad_spec_is_refused(tmp_path, mutate, expect):
    d = _spec_dict()
    mutate(d)
    f = tmp_path / "h200_sxm.yaml"
    f.write_text(yaml.safe_dump(d))
    with pytest.raises(SpecError, match=expect):
        load_spec_file(f)


def test_load_by_path(tmp_path):
    f = tmp_path / "h200_sxm.yaml"
    f.write_text(yaml.safe_dump(_spec_dict()))
    assert load_spec(str(f)).id == "h200_sxm"


def test_a_validators_message_has_no_pydantic_prefix(tmp_path):
    data = yaml.safe_load((SPEC_DIR / "h200_sxm.yaml").read_text())
    data["peak_flops"] = {"bfloat17": 1e15}
    f = tmp_path / "h200_sxm.yaml"
    f.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError) as err:
        load_spec_file(f)
    assert "unknown peak key 'bfloat17'" in str(err.value) and "Value error" not in str(err.value)


def test_a_spec_file_is_parsed_once_per_version(tmp_path, monkeypatch):
    """Read again only when the file changed (its size or change time): a run asks at every record."""
    import os

    from solbench.data import hardware

    reads = []
    real = hardware.read_yaml_file
    monkeypatch.setattr(hardware, "read_yaml_file", lambda *a, **k: reads.append(a[0]) or real(*a, **k))
    f = tmp_path / "h200_sxm.yaml"
    d = _spec_dict()
    f.write_text(yaml.safe_dump(d))
    first = load_spec_file(f)
    assert load_spec_file(f) is first and len(reads) == 1
    d["name"] = "edited"
    f.write_text(yaml.safe_dump(d))
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 1_000_000))  # a coarse clock may not move
    assert load_spec_file(f).name == "edited" and len(reads) == 2
