"""Exploit #24 (peers.md): forged lines appended to the results files.

Finds the results files the parent will write (the ``-o`` path on the parent's command line,
read from ``/proc/<ppid>/cmdline``, and every ``results/**/*.jsonl`` under the parent's and its
own working folder) and appends a forged PASSED record with a perfect SOL to each; returns zeros.
The worker runs under Landlock: it may write only below its own folder and the JIT caches, so
the appends fail and the files stay as they were.
"""

import os
from pathlib import Path

import torch
from _forged import forged_record_line

EXPECT = "INCORRECT"
PEERS = "24"
DEFENSE = "restrict_writes (Landlock) in the worker: no writes outside its folder and the JIT caches"
DEVICE = "any"
PROTECTS_RESULTS = True  # the test also checks that the results files are unchanged


def _targets() -> set[Path]:
    found: set[Path] = set()
    ppid = os.getppid()
    try:
        argv = Path(f"/proc/{ppid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        parent_cwd = Path(os.readlink(f"/proc/{ppid}/cwd"))
    except OSError:
        argv, parent_cwd = [], Path.cwd()
    for flag, value in zip(argv, argv[1:], strict=False):
        if flag in ("-o", "--output"):
            found.add((parent_cwd / value).resolve())
    for root in {parent_cwd, Path.cwd()}:
        found.update(p.resolve() for p in (root / "results").rglob("*.jsonl"))
    return found


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    line = forged_record_line()
    for path in _targets():
        try:
            with open(path, "ab") as fh:
                fh.write(line)
        except OSError:
            pass
    return torch.zeros_like(residual)
