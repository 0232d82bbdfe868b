"""Honest (out = y + 2 * x), and records who called it: module, function and line of every frame
above ``run``, and the thread. Asked with a (1, 1) input, it answers the number of different
caller stacks it has seen (the worker tests read it)."""

import sys
import threading

import torch

_stacks: set = set()


def run(x, y):
    frame, names = sys._getframe(1), []
    while frame is not None:
        names.append((frame.f_globals.get("__name__"), frame.f_code.co_name, frame.f_lineno))
        frame = frame.f_back
    _stacks.add((threading.get_ident(), threading.current_thread().name, tuple(names)))
    if tuple(x.shape) == (1, 1):
        return torch.full((1, 1), float(len(_stacks)))
    return torch.add(y, x, alpha=2)
