"""Honest (CUDA): a CuPy RawKernel (CUDA C++ through NVRTC) on torch's current stream, via DLPack."""

import cupy
import torch

_kernel = cupy.RawKernel(r"""
extern "C" __global__ void scaled_add(const float* x, const float* y, float* out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = y[i] + 2.0f * x[i];
}
""", "scaled_add")


def run(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x, y = x.contiguous(), y.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    args = (cupy.from_dlpack(x), cupy.from_dlpack(y), cupy.from_dlpack(out), cupy.int64(n))
    with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
        _kernel(((n + 255) // 256,), (256,), args)
    return out
