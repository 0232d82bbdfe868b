"""Right output, but zeroes an input afterwards."""


def run(x, y):
    out = x * 2 + y
    y.zero_()
    return out
