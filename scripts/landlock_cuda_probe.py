"""Which Landlock write rules let CUDA initialise? (Run on the GPU machine.)

Each variant runs in a fresh process: apply :func:`solbench.guards.sandbox.restrict_writes` with
its folders, then initialise CUDA and run one kernel. With strace present, the failing variant's
denied calls (EACCES/EPERM) are printed too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys
from solbench.guards.sandbox import default_writable_dirs, restrict_writes
extra, tcp, sig = json.loads(sys.argv[1])
print(restrict_writes(default_writable_dirs(sys.argv[2]) + extra, block_tcp=tcp, scope_signals=sig), flush=True)
import torch
x = torch.ones(4, device="cuda")
print("cuda ok", float((x * 2).sum()), flush=True)
"""

VARIANTS = {
    "default": [[], True, True],
    "no_tcp_no_signals": [[], False, False],
    "+proc_sys": [["/proc", "/sys"], True, True],
    "+tmp": [["/tmp"], True, True],
    "+var_run": [["/var/run", "/run"], True, True],
    "+root": [["/"], True, True],
}


def main() -> int:
    work = tempfile.mkdtemp(prefix="landlock-probe-")
    results = {}
    for name, args in VARIANTS.items():
        cmd = [sys.executable, "-c", CHILD, json.dumps(args), work]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        ok = p.returncode == 0 and "cuda ok" in p.stdout
        results[name] = {"ok": ok, "stdout": p.stdout.strip()[-300:], "stderr": p.stderr.strip()[-400:]}
        print(f"{name:20s} {'OK' if ok else 'FAIL'} {p.stdout.strip().splitlines()[:1]}", flush=True)
        if not ok and name == "default" and shutil.which("strace"):
            s = subprocess.run(["strace", "-f", "-e", "trace=%file,%desc,%ipc,%network", "-o", "/dev/stdout", *cmd],
                               capture_output=True, text=True, timeout=120)
            denied = [ln for ln in s.stdout.splitlines() if "EACCES" in ln or "EPERM" in ln]
            results[name]["denied"] = denied[:40]
            print("\n".join(denied[:40]), flush=True)
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "landlock_probe.json"), "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
