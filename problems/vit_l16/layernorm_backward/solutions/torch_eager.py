"""Straightforward PyTorch: aten.native_layer_norm_backward, the kernel autograd runs for nn.LayerNorm."""

import torch


def run(grad_out: torch.Tensor, x: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor,
        weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    mask = [True, True, True]
    if x.device.type == "cpu":
        # The CPU kernel takes statistics only in the input dtype and sums bf16 columns in bf16
        # (~1% off after 72 rows), so on the CPU it runs in float32 and rounds at the end.
        grads = torch.ops.aten.native_layer_norm_backward(
            grad_out.float(), x.float(), [x.shape[-1]], mean, rstd, weight.float(), weight.float(), mask)
        return grads[0].to(x.dtype), grads[1].to(weight.dtype), grads[2].to(weight.dtype)
    # The bias argument is only read for its shape and dtype (grad_bias = sum of grad_out).
    return torch.ops.aten.native_layer_norm_backward(grad_out, x, [x.shape[-1]], mean, rstd, weight, weight, mask)
