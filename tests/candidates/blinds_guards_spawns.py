"""Blinds the worker's guards (their state and the module's hook), then leaves a process running.

Only the parent's own view of the worker's processes (read from /proc outside the worker) sees it.
"""

import subprocess
import sys

import solbench.guards
import solbench.guards.hooks

solbench.guards.hooks._STATE = None  # the worker's hook then reports nothing
solbench.guards.worker_findings = lambda phase, context: []

_children = []


def run(x, y):
    if not _children:
        _children.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]))
    return y + 2 * x
