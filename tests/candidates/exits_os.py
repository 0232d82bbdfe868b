"""Ends the worker process abruptly with exit code 0."""

import os


def run(x, y):
    os._exit(0)
