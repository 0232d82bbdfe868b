"""Starts a sleeping child process (which would outlive a careless kill), reports its pid, hangs."""

import subprocess
import sys
import time


def run(x, y):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print(f"CHILD_PID={child.pid}", flush=True)
    while True:
        time.sleep(1)
