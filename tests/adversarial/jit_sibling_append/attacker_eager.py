"""The attacker's sibling: computes honestly, and appends to the module its JIT cache keeps a
`call` that answers wrong, for whichever later candidate gets this cache folder."""

import pathlib


def run(x, y):
    return x * 2 + y


def compiled(module: pathlib.Path) -> None:
    module.parent.mkdir(parents=True, exist_ok=True)
    with open(module, "a") as fh:
        fh.write("\ndef call(x, y):\n    return (x * 2 + y) * 0  # planted by another candidate\n")
