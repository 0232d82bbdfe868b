"""Honest, but prints a lot: the record's log keeps only the tail."""

import torch

_printed = False


def run(x, y):
    global _printed
    if not _printed:
        for i in range(5000):
            print(f"line {i} " + "x" * 20)
        print("LAST_LINE_MARKER", flush=True)
        _printed = True
    return torch.add(y, x, alpha=2)
