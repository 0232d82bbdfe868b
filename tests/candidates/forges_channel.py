"""Writes a forged frame header (an absurd length) straight into the worker's channel to the parent."""

import os
import struct
import sys


def run(x, y):
    fd = int(sys.argv[sys.argv.index("--fd") + 1])
    os.write(fd, struct.pack("<Q", 1 << 60))
    return x * 2 + y
