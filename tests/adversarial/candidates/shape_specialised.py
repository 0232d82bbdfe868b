"""Exploit #6 (peers.md): shape specialisation.

Takes a fast wrong path (only the first half of the reduction dimension) for exactly the token
counts the benchmark's workloads use, read from the problem files, and the honest path for any
other shape, which is all a harness that checks on different shapes than it times would see.
solbench checks every workload at the workload's own shape, timed calls included.
"""

from pathlib import Path

import torch
import yaml

EXPECT = "INCORRECT"
PEERS = "6"
DEFENSE = "correctness checked on the timed workload's own shapes, timed outputs included"
DEVICE = "any"

_ROOT = Path(__file__).resolve().parents[3]
_BENCH_T = set()
for _yaml in [*_ROOT.glob("problems/*/attn_o_proj_residual/problem.yaml"),
              *_ROOT.glob("tests/adversarial/fixtures/*/problem.yaml")]:
    try:  # the worker may read only the folder of the problem it runs
        _BENCH_T.update(w["axes"]["T"] for w in yaml.safe_load(_yaml.read_text())["workloads"])
    except OSError:
        continue


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    if attn.shape[0] in _BENCH_T:
        k = attn.shape[1] // 2
        return torch.addmm(residual, attn[:, :k], weight[:, :k].t())
    return torch.addmm(residual, attn, weight.t())
