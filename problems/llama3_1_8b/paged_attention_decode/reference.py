"""Reference: GQA decode over a paged KV cache, per sequence, scores and softmax in float32, rounded once."""

import torch

Q_SCALE = 3.0  # peaked attention, as in trained models (the contiguous attention_decode problem does the same)
LENGTH_SIGMA = 1.0  # log-normal spread of the page counts: a few long sequences, many short ones


def sequence_lengths(kv_indptr: torch.Tensor, kv_last_page_len: torch.Tensor, page_size: int) -> torch.Tensor:
    """Tokens per sequence: full pages but the last, plus the last page's tokens."""
    pages = (kv_indptr[1:] - kv_indptr[:-1]).long()
    return (pages - 1) * page_size + kv_last_page_len.long()


def _gather(cache: torch.Tensor, pages: torch.Tensor, length: int) -> torch.Tensor:
    """A sequence's tokens [length, HKV, D] from its pages."""
    return cache[pages].flatten(0, 1)[:length]


def run(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
    batch, hq, d = q.shape
    hkv, ps = k_cache.shape[2], k_cache.shape[1]
    lengths = sequence_lengths(kv_indptr, kv_last_page_len, ps).tolist()
    starts = kv_indptr.tolist()
    out = torch.empty_like(q)
    for b in range(batch):
        pages = kv_indices[starts[b]:starts[b + 1]].long()
        k = _gather(k_cache, pages, lengths[b]).float().permute(1, 2, 0)  # [HKV, D, L]
        v = _gather(v_cache, pages, lengths[b]).float().transpose(0, 1)  # [HKV, L, D]
        qb = q[b].float().view(hkv, hq // hkv, d)  # query heads 4h..4h+3 share KV head h
        p = (torch.matmul(qb, k) * sm_scale).softmax(dim=-1)
        out[b] = torch.matmul(p, v).reshape(hq, d).to(q.dtype)
    return out


def skewed_split(total: int, parts: int, generator: torch.Generator, device: str) -> torch.Tensor:
    """``parts`` counts >= 1 summing to ``total``, log-normally skewed."""
    weights = (torch.randn(parts, generator=generator, device=device) * LENGTH_SIGMA).exp()
    extra = torch.multinomial(weights, total - parts, replacement=True, generator=generator) if total > parts else None
    counts = torch.ones(parts, dtype=torch.long, device=device)
    return counts + torch.bincount(extra, minlength=parts) if extra is not None else counts


def make_inputs(axes, generator, device):
    b, ps, used, pool = axes["B"], axes["PS"], axes["KV_PAGES"], axes["POOL"]
    pages = skewed_split(used, b, generator, device)
    indptr = torch.zeros(b + 1, dtype=torch.int32, device=device)
    indptr[1:] = pages.cumsum(0)
    q = torch.randn(b, axes["HQ"], axes["D"], generator=generator, device=device) * Q_SCALE
    return {
        "q": q.to(torch.bfloat16),
        "kv_indptr": indptr,
        "kv_indices": torch.randperm(pool, generator=generator, device=device)[:used].to(torch.int32),
        "kv_last_page_len": torch.randint(1, ps + 1, (b,), generator=generator, device=device, dtype=torch.int32),
    }


def cost(axes, inputs):
    hq, hkv, d = axes["HQ"], axes["HKV"], axes["D"]
    tokens = int(sequence_lengths(inputs["kv_indptr"], inputs["kv_last_page_len"], axes["PS"]).sum())
    table = 4 * (axes["B1"] + axes["KV_PAGES"] + axes["B"])
    return {"flops": 4 * tokens * hq * d,
            "bytes": 2 * tokens * hkv * d * 2 + 2 * axes["B"] * hq * d * 2 + table}
