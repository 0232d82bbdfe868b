"""The honest sibling: computes the answer, and caches an honest compiled module."""

import pathlib


def run(x, y):
    return x * 2 + y


def compiled(module: pathlib.Path) -> None:
    module.parent.mkdir(parents=True, exist_ok=True)
    if not module.exists():
        module.write_text("def call(x, y):\n    return eager(x, y)\n")
