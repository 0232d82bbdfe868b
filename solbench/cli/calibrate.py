"""`solbench calibrate`: measure this device's ceilings into a spec file."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path

import typer
from rich.table import Table

from solbench.cli._app import app
from solbench.cli._common import console, err_console, si
from solbench.engine import calibrate as calibration


class CalibrateDevice(str, Enum):
    auto = "auto"
    cuda = "cuda"
    cpu = "cpu"


@app.command()
def calibrate(
    output: Path = typer.Option(None, "-o", "--output",
                                help="spec file to write, <id>.yaml (default: results/calibration/<id>.yaml)"),
    device: CalibrateDevice = typer.Option(CalibrateDevice.auto, "--device", help="cuda, cpu, or auto (cuda if present)"),
    quick: bool = typer.Option(False, "--quick", help="small sizes and short runs (seconds, not a minute)"),
    sustained_s: float = typer.Option(None, "--sustained-s", help="seconds per dtype for the sustained GEMM rate"),
    as_json: bool = typer.Option(False, "--json", help="print the written spec as JSON"),
) -> None:
    """Measure this device's achievable ceilings (GEMM per dtype, memory bandwidth) into a spec file.

    Score against it with `--gpu PATH` (or `--roof measured` once a measured spec of this GPU is
    committed under hardware_specs/measured/).
    """
    spec, path = calibration.calibrate(device.value, output, quick=quick, sustained_s=sustained_s,
                                 log=lambda line: err_console.print(line, markup=False, highlight=False))
    if as_json:
        typer.echo(json.dumps(spec.model_dump(mode="json"), indent=2))
        return
    table = Table(title=f"{spec.name}: measured ceilings ({spec.id})")
    cpu = spec.device_type == "cpu"
    table.add_column("roof")
    table.add_column("roof" if cpu else "burst", justify="right")
    table.add_column("own matmul" if cpu else "sustained", justify="right")
    m = spec.measured.model_dump() if spec.measured else {}
    # on a CPU a dtype without a fast path is roofed at the float32 rate: its own matmul shown beside
    sustained = m.get("burst_peak_flops" if cpu else "sustained_peak_flops", {})
    for k, v in spec.peak_flops.items():
        s = sustained.get(k)
        unit = "OP/s" if k.startswith("int") else "FLOP/s"
        table.add_row(k, si(v, unit), si(s, unit) if s else "-")
    for k, v in m.get("bandwidth", {}).items():
        s = m.get("sustained_bandwidth", {}).get(k)
        table.add_row(f"memory {k}", si(v, "B/s"), si(s, "B/s") if s else "-")
    for k, v in spec.launch_floor_s.items():
        table.add_row(f"launch floor ({k})", si(v, "s"), "-")
    console.print(table)
    console.print(f"wrote {path} (memory_bandwidth {si(spec.memory_bandwidth, 'B/s')}); "
                  f"score against it with --gpu {path}")
