"""Reference: GQA decode over the last `window` cached positions, scores and softmax in float32, rounded once."""

import torch

# q and the cached keys are drawn with this standard deviation so scores have std ~2.25: the softmax
# is neither flat nor one-hot.
QK_STD = 1.5


def run(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, window: int) -> torch.Tensor:
    b, hq, d = q.shape
    length, hkv = k_cache.shape[1], k_cache.shape[2]
    seen = slice(max(0, length - window), length)
    qg = q.float().view(b, hkv, hq // hkv, d)  # query heads grouped under their KV head
    scores = torch.einsum("bhgd,blhd->bhgl", qg, k_cache[:, seen].float()) * d**-0.5
    out = torch.einsum("bhgl,blhd->bhgd", scores.softmax(dim=-1), v_cache[:, seen].float())
    return out.reshape(b, hq, d).to(q.dtype)


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    b, d = axes["B"], axes["D"]
    q = torch.randn(b, axes["HQ"], d, generator=generator, device=device) * QK_STD
    k = torch.randn(b, axes["L"], axes["HKV"], d, generator=generator, device=device) * QK_STD
    return {"q": q.to(torch.bfloat16), "k_cache": k.to(torch.bfloat16)}
