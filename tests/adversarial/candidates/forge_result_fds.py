"""Exploit #24 (peers.md): forged result lines written to every open file descriptor.

Writes a forged PASSED record to descriptors 1..20, which include the worker's log and the
socket to the parent, hoping one of them is the result channel. solbench's channel is a framed
binary protocol read with bounded, validated frames and nothing unpickled: the junk is a protocol
violation, the parent stops the worker and records RUNTIME_ERROR, and the log the record keeps is
only text.
"""

import os

import torch
from _forged import forged_record_line

EXPECT = "RUNTIME_ERROR"
# With CUDA loaded the channel's fd can be above 20 (seen on the H200): the junk misses it, and the
# zero output it returns is INCORRECT. Either way rejected, and no forged line lands anywhere.
ALSO = "INCORRECT"
PEERS = "24"
DEFENSE = "framed, validated wire protocol (solbench.worker.wire); no pickle; records written only by the parent"
DEVICE = "any"
PROTECTS_RESULTS = True


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    line = forged_record_line()
    for fd in range(1, 21):
        try:
            os.write(fd, line)
        except OSError:
            pass
    return torch.zeros_like(residual)
