"""Reference: GQA decode with tanh logit soft-capping, scores and softmax in float32, rounded once."""

import torch

QUERY_PRE_ATTN_SCALAR = 256
# q and the cached keys are drawn with this standard deviation so raw scores have std ~8: large
# enough that the cap at 50 changes which keys dominate (a kernel without it fails), while the capped
# softmax still spreads over several keys.
QK_STD = 2.8


def run(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, softcap: float) -> torch.Tensor:
    b, hq, d = q.shape
    hkv = k_cache.shape[2]
    qg = q.float().view(b, hkv, hq // hkv, d)  # query heads grouped under their KV head
    scores = torch.einsum("bhgd,blhd->bhgl", qg, k_cache.float()) * QUERY_PRE_ATTN_SCALAR**-0.5
    scores = softcap * torch.tanh(scores / softcap)
    out = torch.einsum("bhgl,blhd->bhgd", scores.softmax(dim=-1), v_cache.float())
    return out.reshape(b, hq, d).to(q.dtype)


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    b, d = axes["B"], axes["D"]
    q = torch.randn(b, axes["HQ"], d, generator=generator, device=device) * QK_STD
    k = torch.randn(b, axes["L"], axes["HKV"], d, generator=generator, device=device) * QK_STD
    return {"q": q.to(torch.bfloat16), "k_cache": k.to(torch.bfloat16)}
