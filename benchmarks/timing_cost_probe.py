"""Where a timing's host time goes on a CUDA device: cProfile of a first and a second timing of
the same small call in one fresh process (the worker's position), all-stream timer on and off.

    python3 benchmarks/timing_cost_probe.py --out results/h200/timing_cost_probe.txt
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import torch

from solbench.timing import TimingConfig, time_calls


def _rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype) * w


def _one(label: str, sets: list, cupti: bool, out: io.StringIO) -> None:
    w = torch.ones(4096, device="cuda", dtype=torch.bfloat16)
    cfg = TimingConfig(device="cuda", cupti=cupti, l2_bytes=60 * 2**20)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    result, _ = time_calls(lambda i: _rmsnorm(sets[i], w), len(sets), cfg)
    prof.disable()
    wall = time.perf_counter() - t0
    out.write(f"\n=== {label}: wall {wall:.3f} s, method {result.method}, n {result.n}, "
              f"median {result.median_s * 1e6:.2f} us, warmup {result.warmup_calls}, flags {result.flags}\n")
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(35)
    out.write(s.getvalue())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = io.StringIO()
    t0 = time.perf_counter()
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    out.write(f"cuda init {time.perf_counter() - t0:.3f} s; torch {torch.__version__}\n")
    sets = [torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16) for _ in range(256)]
    _one("first timing, all streams, 256 sets", sets, True, out)
    _one("second timing, all streams, 256 sets", sets, True, out)
    _one("third timing, events only, 256 sets", sets, False, out)
    big = [torch.randn(8192, 4096, device="cuda", dtype=torch.bfloat16) for _ in range(4)]
    _one("fourth timing, all streams, 4 sets of 64 MiB", big, True, out)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(out.getvalue())
    print(out.getvalue()[:6000])


if __name__ == "__main__":
    main()
