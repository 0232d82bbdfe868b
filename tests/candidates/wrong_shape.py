"""Wrong shape: drops the last row."""


def run(x, y):
    return (x * 2 + y)[:-1]
