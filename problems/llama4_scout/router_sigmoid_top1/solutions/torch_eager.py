"""Eager PyTorch, as HF's Llama4Router + Llama4TextMoe (top-1, sigmoid, scale the input)."""

import torch


def run(x, router_logits):
    top, ids = torch.topk(router_logits, 1, dim=-1)
    return x * torch.sigmoid(top).to(x.dtype), ids[:, 0].to(torch.int32)
