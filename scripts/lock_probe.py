"""Which processes the CUDA driver's process lock refuses on this machine (run on a GPU; prints one line each).

A busy child process (device spins back to back) is locked and unlocked after each kind of setup a solbench
worker goes through: none, torch's profiler (Kineto, CUPTI) run once as the timer does, a legacy CUDA IPC
allocation of another process opened, a VMM (cuMemCreate) allocation imported by a POSIX fd as
the device pool does. H200 call 23 (2026-12-03): a timing that asked every process in flight was refused 333 times, code 801.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import sys, torch
    torch.cuda.init()
    kind = sys.argv[1]
    keep = None
    if kind == "kineto":
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]):
            torch.cuda._sleep(1000)
            torch.cuda.synchronize()
    elif kind == "ipc":
        import cupy
        keep = cupy.cuda.runtime.ipcOpenMemHandle(bytes.fromhex(sys.argv[2]))
    elif kind == "vmm":
        from solbench.worker import vmm
        keep = vmm.open_fd(int(sys.argv[2]), int(sys.argv[3]), 0)
    print("ready", flush=True)
    while True:
        torch.cuda._sleep(100000)
        torch.cuda.synchronize()
""")


def probe(kind: str, locker, extra: list[str], fds: tuple[int, ...] = ()) -> str:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, kind, *extra], stdout=subprocess.PIPE, text=True,
                            pass_fds=fds)
    try:
        if proc.stdout.readline().strip() != "ready":
            return f"{kind}: the child did not start"
        before = dict(locker.refusals)
        unlock = locker(proc.pid)
        if unlock is None:
            codes = {k: v - before.get(k, 0) for k, v in locker.refusals.items() if v != before.get(k, 0)}
            return f"{kind}: refused {codes}"
        return f"{kind}: locked, unlocked {unlock()}"
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    import torch

    if not torch.cuda.is_available():
        sys.exit("lock_probe.py: needs a CUDA device (run it on a GPU machine)")
    try:
        import cupy
    except ImportError:
        sys.exit("lock_probe.py: needs cupy for the CUDA IPC probe (pip install cupy-cuda12x or cupy-cuda13x)")

    from solbench.engine.cudalock import process_locker

    locker = process_locker()
    if locker is None:
        print("no process lock in this driver")
        return
    buf = cupy.cuda.runtime.malloc(1 << 20)
    handle = bytes(cupy.cuda.runtime.ipcGetMemHandle(buf)).hex()
    for kind, extra in (("plain", []), ("kineto", []), ("ipc", [handle])):
        print(probe(kind, locker, extra), flush=True)
    from solbench.worker import vmm

    mapping, fd = vmm.create(1 << 21, 0)
    print(probe("vmm", locker, [str(fd), str(mapping.size)], (fd,)), flush=True)


if __name__ == "__main__":
    main()
