"""Crashes the worker with a segmentation fault (reads address 0)."""

import ctypes


def run(x, y):
    ctypes.string_at(0)
    return x
