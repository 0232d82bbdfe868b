"""Exploit (peers.md #2 family): the output aliases an input.

Writes the result into ``residual`` in place and returns it: no output allocation, and the
harness's copy of "the output" is the input buffer. The problem does not declare ``out`` as
``inplace_of: residual``, so sharing memory with an input is wrong (and the input was mutated).
"""

import torch

EXPECT = "INCORRECT"
PEERS = "2"
DEFENSE = "check_output_objects (output shares memory with an input) and the input-mutation check"
DEVICE = "any"


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    residual.add_((attn.float() @ weight.float().t()).to(residual.dtype))
    return residual
