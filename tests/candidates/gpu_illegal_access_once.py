"""On the first workload (4 rows) a Triton store far out of bounds (a CUDA illegal memory access,
which poisons the process's CUDA context); honest on every other workload. The next workload
must get a fresh worker and pass."""

import torch
import triton
import triton.language as tl


@triton.jit
def _store_far(out_ptr, offset):
    tl.store(out_ptr + offset, 1.0)


def run(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.add(y, x, alpha=2)
    if x.shape[0] == 4:
        _store_far[(1,)](out, 1 << 40)
        torch.cuda.synchronize()
    return out
