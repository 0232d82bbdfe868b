"""Returns a torch.Tensor subclass holding the right values (a lazy-output trick in disguise)."""

import torch


class Sneaky(torch.Tensor):
    pass


def run(x, y):
    return (x * 2 + y).as_subclass(Sneaky)
