"""torch.compile of this folder's torch_eager.run, compiled on the first call (static shapes)."""

import torch

import solbench

_eager = solbench.load_sibling(__file__, "torch_eager.py").run
_compiled = None


def run(
    k_cache: torch.Tensor, v_cache: torch.Tensor, k_new: torch.Tensor, v_new: torch.Tensor, positions: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_eager, dynamic=False)
    return _compiled(k_cache, v_cache, k_new, v_new, positions)
