"""Wrong: subtracts y instead of adding it."""


def run(x, y):
    return x * 2 - y
