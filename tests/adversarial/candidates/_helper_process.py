"""Shared by the process exploits (not a candidate: the leading underscore keeps it out of the
corpus): an output tensor backed by a shared file, and a helper process that fills it later."""

import os
import subprocess
import sys
import tempfile

import torch

# The helper: wait, read the float32 inputs, compute, write bfloat16 bits into the shared file.
HELPER = r"""
import sys, time, numpy as np
d = sys.argv[1]
time.sleep(float(sys.argv[2]))
a, w, r = (np.fromfile(f"{d}/{n}", dtype=np.float32) for n in ("attn", "weight", "residual"))
h = int(round(w.size ** 0.5))
out = a.reshape(-1, h) @ w.reshape(h, h).T + r.reshape(-1, h)
bits = out.astype(np.float32).view(np.uint32)
bf16 = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
np.memmap(f"{d}/out", dtype=np.uint16, mode="r+", shape=bf16.shape)[:] = bf16
"""


def shared_output_and_job(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> tuple:
    """(output tensor in a shared file, folder, argv of the helper that will fill it)."""
    folder = tempfile.mkdtemp(prefix="exploit-")
    for name, t in (("attn", attn), ("weight", weight), ("residual", residual)):
        t.float().numpy().tofile(os.path.join(folder, name))
    with open(os.path.join(folder, "out"), "wb") as fh:
        fh.truncate(residual.numel() * 2)
    out = torch.from_file(os.path.join(folder, "out"), shared=True, size=residual.numel(), dtype=torch.bfloat16)
    return out.view(residual.shape), folder, [sys.executable, "-c", HELPER, folder, "0.3"]


def start(argv: list, new_session: bool = False) -> subprocess.Popen:
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=new_session)
