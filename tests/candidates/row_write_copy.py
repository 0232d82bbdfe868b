"""Right values, but in a new tensor: the declared in-place input is left unchanged."""


def run(cache, x):
    out = cache.clone()
    out[0] = x
    return out
