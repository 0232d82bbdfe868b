"""Reference: absorbed MLA decode over a paged latent cache, per sequence, float32 scores, rounded once."""

import torch

ROPE_DIMS = 64  # qk_rope_head_dim: the tail of each q / cache row
Q_STD = 0.7  # scores of std ~2.3 at the model's scale: neither flat nor one-hot (deepseek_v3.mla_decode)
LENGTH_SIGMA = 1.0


def sequence_lengths(kv_indptr, kv_last_page_len, page_size):
    pages = (kv_indptr[1:] - kv_indptr[:-1]).long()
    return (pages - 1) * page_size + kv_last_page_len.long()


def run(q, kv_cache, kv_indptr, kv_indices, kv_last_page_len, softmax_scale):
    batch, heads, _ = q.shape
    latent = q.shape[-1] - ROPE_DIMS  # values are the latent part of the row only
    lengths = sequence_lengths(kv_indptr, kv_last_page_len, kv_cache.shape[1]).tolist()
    starts = kv_indptr.tolist()
    out = torch.empty(batch, heads, latent, dtype=q.dtype, device=q.device)
    for b in range(batch):
        rows = kv_cache[kv_indices[starts[b]:starts[b + 1]].long()].flatten(0, 1)[:lengths[b]].float()  # [L, CR]
        p = (torch.matmul(q[b].float(), rows.t()) * softmax_scale).softmax(dim=-1)
        out[b] = torch.matmul(p, rows[:, :latent]).to(q.dtype)
    return out


def skewed_split(total, parts, generator, device):
    weights = (torch.randn(parts, generator=generator, device=device) * LENGTH_SIGMA).exp()
    counts = torch.ones(parts, dtype=torch.long, device=device)
    if total > parts:
        counts += torch.bincount(torch.multinomial(weights, total - parts, replacement=True, generator=generator),
                                 minlength=parts)
    return counts


def make_inputs(axes, generator, device):
    b, ps, used, pool = axes["B"], axes["PS"], axes["KV_PAGES"], axes["POOL"]
    indptr = torch.zeros(b + 1, dtype=torch.int32, device=device)
    indptr[1:] = skewed_split(used, b, generator, device).cumsum(0)
    q = torch.randn(b, axes["H"], axes["CR"], generator=generator, device=device) * Q_STD
    return {
        "q": q.to(torch.bfloat16),
        "kv_indptr": indptr,
        "kv_indices": torch.randperm(pool, generator=generator, device=device)[:used].to(torch.int32),
        "kv_last_page_len": torch.randint(1, ps + 1, (b,), generator=generator, device=device, dtype=torch.int32),
    }


def cost(axes, inputs):
    h, c, cr = axes["H"], axes["C"], axes["CR"]
    tokens = int(sequence_lengths(inputs["kv_indptr"], inputs["kv_last_page_len"], axes["PS"]).sum())
    table = 4 * (axes["B1"] + axes["KV_PAGES"] + axes["B"])
    return {"flops": 2 * tokens * h * (cr + c),
            "bytes": tokens * cr * 2 + axes["B"] * h * (cr + c) * 2 + table}
