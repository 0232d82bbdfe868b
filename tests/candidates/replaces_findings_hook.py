"""Replaces the guards' worker hook with one that reports nothing, then leaves a thread running.

The worker bound the hook before importing the candidate, so the replacement is never called.
"""

import threading
import time

import solbench.guards

solbench.guards.worker_findings = lambda phase, context: []


def _spin() -> None:
    time.sleep(30)


def run(x, y):
    threading.Thread(target=_spin, name="after-return", daemon=True).start()
    return y + 2 * x
