"""Reference: speculative tree verification, per sequence: the draft tokens' queries against the paged
prefix (all of it) and the draft tokens (their tree ancestors and themselves), float32 softmax, rounded once."""

import torch

Q_SCALE = 3.0  # peaked attention, as in trained models (as in paged_attention_decode)
LENGTH_SIGMA = 1.0  # log-normal spread of the prefix page counts
DEPTH_DECAY = 0.6  # a new draft node's parent is drawn with weight DEPTH_DECAY ** depth


def sequence_lengths(kv_indptr, kv_last_page_len, page_size: int):
    """Prefix tokens per sequence: full pages but the last, plus the last page's tokens."""
    pages = (kv_indptr[1:] - kv_indptr[:-1]).long()
    return (pages - 1) * page_size + kv_last_page_len.long()


def run(q, k_draft, v_draft, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, tree_mask, sm_scale):
    batch, n, hq, d = q.shape
    ps, hkv = k_cache.shape[1], k_cache.shape[2]
    lengths, starts = sequence_lengths(kv_indptr, kv_last_page_len, ps).tolist(), kv_indptr.tolist()
    out = torch.empty_like(q)
    for b in range(batch):
        pages = kv_indices[starts[b]:starts[b + 1]].long()
        k = torch.cat([k_cache[pages].flatten(0, 1)[:lengths[b]], k_draft[b]]).float().permute(1, 2, 0)  # [HKV, D, L+N]
        v = torch.cat([v_cache[pages].flatten(0, 1)[:lengths[b]], v_draft[b]]).float().transpose(0, 1)  # [HKV, L+N, D]
        allowed = torch.cat([tree_mask.new_ones(n, lengths[b]), tree_mask[b]], dim=1)  # [N, L+N]
        qb = q[b].float().view(n, hkv, hq // hkv, d).permute(1, 0, 2, 3).reshape(hkv, -1, d)  # rows (token, head)
        s = (torch.matmul(qb, k) * sm_scale).view(hkv, n, hq // hkv, -1)
        s = s.masked_fill(~allowed[None, :, None, :], float("-inf"))
        o = torch.matmul(s.softmax(-1).view(hkv, n * (hq // hkv), -1), v)  # [HKV, N*G, D]
        out[b] = o.view(hkv, n, hq // hkv, d).permute(1, 0, 2, 3).reshape(n, hq, d).to(q.dtype)
    return out


def skewed_split(total: int, parts: int, generator: torch.Generator, device: str) -> torch.Tensor:
    """``parts`` counts >= 1 summing to ``total``, log-normally skewed."""
    weights = (torch.randn(parts, generator=generator, device=device) * LENGTH_SIGMA).exp()
    counts = torch.ones(parts, dtype=torch.long, device=device)
    if total > parts:
        counts += torch.bincount(torch.multinomial(weights, total - parts, replacement=True, generator=generator),
                                 minlength=parts)
    return counts


def draft_trees(batch: int, n: int, generator: torch.Generator, device: str) -> torch.Tensor:
    """[B, N, N] ancestor-or-self masks of random trees in topological order (node 0 is the root)."""
    mask = torch.zeros(batch, n, n, dtype=torch.bool, device=device)
    depth = torch.zeros(batch, n, device=device)
    rows = torch.arange(batch, device=device)
    mask[:, 0, 0] = True
    for i in range(1, n):
        parent = torch.multinomial(DEPTH_DECAY ** depth[:, :i], 1, generator=generator)[:, 0]
        mask[:, i] = mask[rows, parent]
        mask[:, i, i] = True
        depth[:, i] = depth[rows, parent] + 1
    return mask


def make_inputs(axes, generator, device):
    b, n, ps, used, pool = axes["B"], axes["N"], axes["PS"], axes["KV_PAGES"], axes["POOL"]
    indptr = torch.zeros(b + 1, dtype=torch.int32, device=device)
    indptr[1:] = skewed_split(used, b, generator, device).cumsum(0)
    q = torch.randn(b, n, axes["HQ"], axes["D"], generator=generator, device=device) * Q_SCALE
    return {
        "q": q.to(torch.bfloat16),
        "kv_indptr": indptr,
        "kv_indices": torch.randperm(pool, generator=generator, device=device)[:used].to(torch.int32),
        "kv_last_page_len": torch.randint(1, ps + 1, (b,), generator=generator, device=device, dtype=torch.int32),
        "tree_mask": draft_trees(b, n, generator, device),
    }


def cost(axes, inputs):
    b, n, hq, hkv, d = axes["B"], axes["N"], axes["HQ"], axes["HKV"], axes["D"]
    prefix = int(sequence_lengths(inputs["kv_indptr"], inputs["kv_last_page_len"], axes["PS"]).sum())
    pairs = n * prefix + int(inputs["tree_mask"].sum())  # (draft token, key) pairs attended, per query head
    draft = b * n * d * 2 * (2 * hq + 2 * hkv)  # q, out, k_draft, v_draft
    table = 4 * (axes["B1"] + axes["KV_PAGES"] + b) + b * n * n  # page table, lengths, tree mask
    return {"flops": 4 * d * hq * pairs, "bytes": 2 * prefix * hkv * d * 2 + draft + table}
