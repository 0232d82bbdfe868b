"""torch.compile of GELU-tanh(gate) * up in float32 (one fused kernel), compiled on the first call."""

import torch
import torch.nn.functional as F

_compiled = None


def _geglu(gate_up):
    gate, up = gate_up.float().chunk(2, dim=-1)
    return (F.gelu(gate, approximate="tanh") * up).to(gate_up.dtype)


def run(gate_up: torch.Tensor) -> torch.Tensor:
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_geglu, dynamic=False)
    return _compiled(gate_up)
