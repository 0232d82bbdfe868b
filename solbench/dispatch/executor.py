"""A local executor process: ``python -m solbench.dispatch.executor --result-fd N``.

It reads JSON lines on stdin (a start message, then one work item per line; EOF ends it) and
writes its messages (:mod:`solbench.dispatch.session`) as JSON lines on the file descriptor ``N``,
never on stdout, which it points at stderr so that a library's print cannot corrupt them. It owns
one device: the driver sets ``CUDA_VISIBLE_DEVICES`` to one GPU, or pins it to a share of the cores.
If the driver dies, the executor stops (SIGTERM to itself: its workers are killed on the way out).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from typing import IO, Any

from solbench.dispatch.session import ExecutorSession
from solbench.errors import SolbenchError
from solbench.settings import PARENT_POLL_S
from solbench.worker import stop_on_signals


def _watch_parent(parent: int) -> None:
    """Stop this process when the driver is gone (it was re-parented)."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="driver-watch", daemon=True).start()


def _sender(out: IO[str]) -> Any:
    def send(message: dict[str, Any]) -> None:
        out.write(json.dumps(message) + "\n")
        out.flush()

    return send


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--result-fd", type=int, required=True)
    args = parser.parse_args(argv)
    out = os.fdopen(args.result_fd, "w", encoding="utf-8")
    os.dup2(2, 1)  # stray prints go to stderr, never into the messages
    _watch_parent(os.getppid())
    send = _sender(out)
    start = json.loads(sys.stdin.readline() or "{}")
    if start.get("cpus"):
        os.sched_setaffinity(0, start["cpus"])  # inherited by the workers: a share of the cores each
    try:
        session = ExecutorSession(start)
    except (SolbenchError, KeyError, ValueError) as err:
        send({"kind": "fatal", "reason": str(err)})
        return 1
    send(session.hello())
    with stop_on_signals():
        try:
            for line in sys.stdin:
                if line.strip():
                    session.run(json.loads(line), send)
        finally:
            session.close()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # the driver is gone: nobody to report to
        sys.exit(1)
