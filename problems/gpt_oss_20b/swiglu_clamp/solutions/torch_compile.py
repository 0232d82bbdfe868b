"""torch.compile of this folder's torch_eager.run, compiled on the first call (static shapes)."""

import solbench

_eager = solbench.load_sibling(__file__, "torch_eager.py").run
_compiled = None


def run(gate_up):
    global _compiled
    if _compiled is None:
        import torch

        _compiled = torch.compile(_eager, dynamic=False)
    return _compiled(gate_up)
