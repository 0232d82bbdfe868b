"""Calls sys.exit(0) inside run()."""

import sys


def run(x, y):
    sys.exit(0)
