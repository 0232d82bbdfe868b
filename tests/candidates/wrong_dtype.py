"""Wrong dtype: returns float64."""


def run(x, y):
    return (x * 2 + y).double()
