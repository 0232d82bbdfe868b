"""Not in peers.md: claim the device ran out of memory, to be run again and again, and never judged.

A record that runs out of memory beside other records is run again with more memory, and finally
alone: running out beside others is not the candidate's doing. A candidate can raise the words of an
allocation failure itself. Every attempt it is given drains the pipeline a little more (alone, every
other lane waits), and if the last attempt ended the record as "not run" it would never get a verdict.
The last attempt runs alone: an allocation failure there is the candidate's own, and its verdict.
"""

import torch

EXPECT = "RUNTIME_ERROR"
PEERS = "-"
DEFENSE = "retried beside others, then alone, where an allocation failure is the candidate's own: its verdict"
DEVICE = "any"


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 139.80 GiB "
                       "of which 1.20 GiB is free.")
