"""Raises inside run()."""


def run(x, y):
    raise ValueError("candidate exploded on purpose")
