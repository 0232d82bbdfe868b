"""Run only by tests/test_suite_rules.py (not collected by name): one test installs a SIGTERM handler
as Ray does, the next one waits to be stopped."""

import os
import signal
import sys
import time
from pathlib import Path


def _raise_exit(signum, frame):
    raise SystemExit(128 + signum)


def test_installs_a_handler_like_ray():
    signal.signal(signal.SIGTERM, _raise_exit)


def test_waits_for_sigterm():
    Path(os.environ["SIGTERM_PROBE_READY"]).write_text(str(os.getpid()))
    time.sleep(120)
    sys.exit(3)  # never reached when SIGTERM stops the run
