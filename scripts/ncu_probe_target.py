"""A few small kernels for Nsight Compute probes: a bf16 matmul, an eager rmsnorm and a Triton
kernel, each inside an NVTX range named after it (the stored ncu outputs in tests/fixtures/ncu/
come from this script on the H200: scripts/h200_session.sh ncu_probe)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


def main() -> None:
    dev = "cuda"
    a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    x = torch.randn(64, 4096, device=dev, dtype=torch.bfloat16)
    w = torch.randn(4096, device=dev, dtype=torch.bfloat16)
    v = torch.randn(1 << 24, device=dev)
    y = torch.empty_like(v)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("matmul_bf16")
    a @ b
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_push("rmsnorm_eager")
    xf = x.float()
    (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype) * w
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_push("triton_scale")
    _scale[(triton.cdiv(v.numel(), 1024),)](v, y, v.numel(), BLOCK=1024)
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
