"""Honest in-place row write."""


def run(cache, x):
    cache[0].copy_(x)
    return cache
