"""Reference: argmax expert, the input scaled by sigmoid of its logit in float32, rounded once."""

import torch


def run(x, router_logits):
    top, ids = router_logits.max(dim=-1)
    return (x.float() * torch.sigmoid(top.double()).float()[:, None]).to(x.dtype), ids.to(torch.int32)
