"""Imports a module that does not exist."""

import solbench_no_such_module  # noqa: F401


def run(x, y):
    return x
