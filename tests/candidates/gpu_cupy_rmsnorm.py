"""A CuPy RawKernel (CUDA C++ through NVRTC) for llama3_1_8b.rmsnorm (a memory-bound problem).

One block per row; each thread loads 16-byte vectors of 8 bfloat16 values into registers, the sum
of squares is reduced with warp shuffles, and the row is scaled and written from the registers:
x is read once and out written once. bfloat16 is handled as raw 16-bit words (no CUDA headers).

    solbench run llama3_1_8b.rmsnorm -s tests/candidates/gpu_cupy_rmsnorm.py
"""

import cupy
import torch

_SOURCE = r"""
#define MAX_VEC_PER_THREAD 4

__device__ __forceinline__ float lo_bf16(unsigned int u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float hi_bf16(unsigned int u) { return __uint_as_float(u & 0xFFFF0000u); }
__device__ __forceinline__ unsigned int to_bf16(float f) {  // round to nearest even
    unsigned int u = __float_as_uint(f);
    return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}
__device__ __forceinline__ unsigned int pack2(float a, float b) { return to_bf16(a) | (to_bf16(b) << 16); }

extern "C" __global__ void rmsnorm_bf16(const uint4* __restrict__ x, const uint4* __restrict__ w,
                                        uint4* __restrict__ out, int n_vec, float inv_n, float eps) {
    const uint4* xr = x + (long long)blockIdx.x * n_vec;
    uint4* orow = out + (long long)blockIdx.x * n_vec;
    uint4 v[MAX_VEC_PER_THREAD];
    float ss = 0.0f;
    int nv = 0;
    for (int i = threadIdx.x; i < n_vec && nv < MAX_VEC_PER_THREAD; i += blockDim.x, ++nv) {
        v[nv] = xr[i];
        unsigned int p[4] = {v[nv].x, v[nv].y, v[nv].z, v[nv].w};
        #pragma unroll
        for (int k = 0; k < 4; ++k) {
            float a = lo_bf16(p[k]), b = hi_bf16(p[k]);
            ss += a * a + b * b;
        }
    }
    __shared__ float partial[32];
    #pragma unroll
    for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) partial[warp] = ss;
    __syncthreads();
    int n_warps = (blockDim.x + 31) >> 5;
    ss = lane < n_warps ? partial[lane] : 0.0f;
    #pragma unroll
    for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    float rstd = rsqrtf(ss * inv_n + eps);
    nv = 0;
    for (int i = threadIdx.x; i < n_vec && nv < MAX_VEC_PER_THREAD; i += blockDim.x, ++nv) {
        uint4 wv = w[i];
        unsigned int p[4] = {v[nv].x, v[nv].y, v[nv].z, v[nv].w};
        unsigned int q[4] = {wv.x, wv.y, wv.z, wv.w};
        unsigned int r[4];
        #pragma unroll
        for (int k = 0; k < 4; ++k)
            r[k] = pack2(lo_bf16(p[k]) * rstd * lo_bf16(q[k]), hi_bf16(p[k]) * rstd * hi_bf16(q[k]));
        orow[i] = make_uint4(r[0], r[1], r[2], r[3]);
    }
}
"""
_kernel = cupy.RawKernel(_SOURCE, "rmsnorm_bf16")


def run(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    h = x.shape[-1]
    rows = x.numel() // h
    n_vec = h // 8  # 8 bfloat16 per 16-byte vector
    threads = min(1024, max(32, (n_vec + 31) // 32 * 32))
    if h % 8 or n_vec > 4 * threads:
        raise ValueError(f"hidden size {h}: this kernel needs a multiple of 8 up to {8 * 4 * 1024}")
    x = x.contiguous()
    out = torch.empty_like(x)
    words = [cupy.from_dlpack(t.view(torch.int16)) for t in (x, weight.contiguous(), out)]
    with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
        _kernel((rows,), (threads,), (*words, cupy.int32(n_vec), cupy.float32(1.0 / h), cupy.float32(eps)))
    return out
