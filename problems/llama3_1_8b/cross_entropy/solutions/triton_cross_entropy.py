"""Triton per-token cross-entropy over the Llama-3 vocabulary: loss = logsumexp(logits) - logits[target].

One pass over the logits: each program streams its slice of a row in BLOCK_V chunks (a pipelined
`tl.range`, so the next chunks' loads are in flight) and keeps an online (max, sum of exp) pair in
fp32, rescaling the sum when the max grows, so every logit is read exactly once and exponentiated
once. The target logit is one scalar load.

Large T: one program per row writes the loss directly. Small T (decode-sized batches) would leave
most SMs idle on a 128k-wide row, so the row is split over several programs that write partial
(max, sum) pairs, and a second tiny kernel merges them. Targets equal to -100 (PyTorch's default
ignore_index) give a loss of 0, as F.cross_entropy(reduction="none") does.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

# (BLOCK_V, warps, STAGES): STAGES > 1 keeps the next chunks' loads in flight (tl.range num_stages).
CONFIGS = [triton.Config({"BLOCK_V": b, "STAGES": s}, num_warps=w)
           for b, w, s in ((2048, 4, 1), (4096, 8, 1), (8192, 8, 1), (8192, 16, 1), (4096, 4, 3), (4096, 8, 2),
                           (8192, 8, 2))]
IGNORE_INDEX = -100
SPLIT_GRANULE = 2048  # a split covers a multiple of this many columns
PROGRAMS_PER_SM = 4  # split rows until about this many programs per SM are in flight


@triton.jit
def _target_loss(logits_row, target, n_cols, lse):
    valid = (target != -100) & (target >= 0) & (target < n_cols)
    x_t = tl.load(logits_row + tl.where(valid, target, 0)).to(tl.float32)
    return tl.where(valid, lse - x_t, 0.0)


@triton.jit
def ce_partial_kernel(logits_ptr, targets_ptr, loss_ptr, part_max_ptr, part_sum_ptr,
                      n_rows, n_cols, stride_row, cols_per_split,
                      SPLITS: tl.constexpr, BLOCK_V: tl.constexpr, STAGES: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)
    row_ptr = logits_ptr + row * stride_row
    lo = split * cols_per_split
    hi = tl.minimum(lo + cols_per_split, n_cols)
    offs = tl.arange(0, BLOCK_V)
    m = float("-inf")  # running max and sum of exp(x - m), fp32 scalars carried through the loop
    s = 0.0
    for start in tl.range(lo, hi, BLOCK_V, num_stages=STAGES):
        cols = start + offs
        x = tl.load(row_ptr + cols, mask=cols < hi, other=float("-inf"), eviction_policy="evict_first")
        x = x.to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    if SPLITS == 1:
        target = tl.load(targets_ptr + row)
        tl.store(loss_ptr + row, _target_loss(row_ptr, target, n_cols, m + tl.log(s)))
    else:
        tl.store(part_max_ptr + row * SPLITS + split, m)
        tl.store(part_sum_ptr + row * SPLITS + split, s)


@triton.jit
def ce_combine_kernel(logits_ptr, targets_ptr, loss_ptr, part_max_ptr, part_sum_ptr, n_cols, stride_row,
                      SPLITS: tl.constexpr, BLOCK_S: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    idx = tl.arange(0, BLOCK_S)
    mask = idx < SPLITS
    m = tl.load(part_max_ptr + row * SPLITS + idx, mask=mask, other=float("-inf"))
    s = tl.load(part_sum_ptr + row * SPLITS + idx, mask=mask, other=0.0)
    m_all = tl.max(m, axis=0)
    s_all = tl.sum(tl.where(mask, s * tl.exp(m - m_all), 0.0), axis=0)
    target = tl.load(targets_ptr + row)
    tl.store(loss_ptr + row, _target_loss(logits_ptr + row * stride_row, target, n_cols, m_all + tl.log(s_all)))


def _quick_bench(kernel_call, quantiles):
    """Autotuning timer: 25 ms of reps ranks a handful of configs; the default 100 ms only slows tuning."""
    from triton.testing import do_bench

    return do_bench(kernel_call, warmup=5, rep=25, quantiles=quantiles)


_tuned_partial = triton.autotune(do_bench=_quick_bench, configs=CONFIGS,
                                 key=["n_rows", "n_cols", "SPLITS"])(ce_partial_kernel)


def _num_sms(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4


def plan_splits(n_rows: int, n_cols: int, num_sms: int) -> tuple[int, int]:
    """(splits per row, columns per split): enough programs to fill the GPU, none of them empty."""
    splits = max(1, min(triton.cdiv(PROGRAMS_PER_SM * num_sms, n_rows), triton.cdiv(n_cols, SPLIT_GRANULE)))
    cols_per_split = triton.cdiv(triton.cdiv(n_cols, splits), SPLIT_GRANULE) * SPLIT_GRANULE
    return triton.cdiv(n_cols, cols_per_split), cols_per_split


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor, config: dict | None = None,
                  splits: tuple[int, int] | None = None) -> torch.Tensor:
    """Per-row loss (float32). ``config`` ({"BLOCK_V", "STAGES", "num_warps"}) skips autotuning; ``splits``
    ((splits, columns per split)) overrides the plan."""
    if logits.stride(-1) != 1:
        logits = logits.contiguous()
    n_rows, n_cols = logits.shape
    targets = targets.contiguous()
    loss = torch.empty(n_rows, device=logits.device, dtype=torch.float32)
    n_splits, cols_per_split = splits or plan_splits(n_rows, n_cols, _num_sms(logits.device))
    if n_splits > 1:
        part_max = torch.empty((n_rows, n_splits), device=logits.device, dtype=torch.float32)
        part_sum = torch.empty_like(part_max)
    else:
        part_max = part_sum = loss  # unused by the kernel when SPLITS == 1
    args = (logits, targets, loss, part_max, part_sum, n_rows, n_cols, logits.stride(0), cols_per_split)
    if config is None:
        _tuned_partial[(n_rows, n_splits)](*args, SPLITS=n_splits)
    else:
        ce_partial_kernel[(n_rows, n_splits)](*args, SPLITS=n_splits, **config)
    if n_splits > 1:
        ce_combine_kernel[(n_rows,)](logits, targets, loss, part_max, part_sum, n_cols, logits.stride(0),
                                     SPLITS=n_splits, BLOCK_S=triton.next_power_of_2(n_splits), num_warps=1)
    return loss


def run(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return cross_entropy(logits, targets)
