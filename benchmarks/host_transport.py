"""What the memfd route costs with the parent's request written into a fresh file per message, and
into the channel's reused file (``wire.SendArena``).

Two measures, ``--calls`` times each way, alternately: ``send``, one message of the workload's inputs
through a socket pair (the sender's write and the receiver's copy, nothing else), and ``reference``,
a problem's reference on those inputs in a problem host (the inputs there, the outputs back, the
reference's own work: on the CPU most of it). The median seconds, and the ratios. On the H200 (2026-12-02) these requests, the burst's checked calls and the timed
rechecks, were the lanes' busiest code (`results/h200/runs_2026-12-02/diag_call8/`).

    python benchmarks/host_transport.py --problem llama3_1_8b.rmsnorm --workload prefill_b2_s8192 \\
        -o results/host_transport_cpu_2026-12-02.json
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from solbench.data.inputs import make_inputs
from solbench.data.library import problems_root
from solbench.data.problem import find_problems, load_problem
from solbench.engine.problem_host import new_host
from solbench.worker.wire import SendArena, encode_header, recv_message, send_encoded


def send_once(inputs: dict[str, Any], arena: SendArena | None) -> float:
    """Seconds to send the inputs through a socket pair and have them copied out on the other side."""
    a, b = socket.socketpair()
    try:
        t0 = time.perf_counter()
        sender = threading.Thread(target=lambda: send_encoded(a, *encode_header(inputs), time.monotonic() + 60,
                                                              arena=arena))
        sender.start()
        recv_message(b, time.monotonic() + 60)
        sender.join()
        return time.perf_counter() - t0
    finally:
        a.close()
        b.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default="llama3_1_8b.rmsnorm")
    ap.add_argument("--workload", default="prefill_b2_s8192")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--calls", type=int, default=8)
    ap.add_argument("-o", "--output", default=None)
    args = ap.parse_args()
    path = next(p for p in find_problems(problems_root(None)) if load_problem(p).name == args.problem)
    problem = load_problem(path)
    workload = next(w for w in problem.workloads if w.name == args.workload)
    axes = problem.resolve_axes(workload)
    inputs = make_inputs(problem, axes, 0, device=args.device)
    arena = SendArena()
    send_once(inputs, arena)  # the arena's pages faulted in once, as a run's first request does
    sends: dict[str, list[float]] = {"fresh_file": [], "reused_file": []}
    for _ in range(args.calls):
        for mode in sends:
            sends[mode].append(send_once(inputs, None if mode == "fresh_file" else arena))
    arena.close()
    times: dict[str, list[float]] = {"fresh_file": [], "reused_file": []}
    with new_host(args.device) as host:
        host.expect([problem.folder])
        host.reference(problem, axes, list(inputs.values()), args.device)  # the host's start and first call
        for _ in range(args.calls):
            for mode in times:
                host.client.arena.max_bytes = 0 if mode == "fresh_file" else 1 << 30
                t0 = time.perf_counter()
                host.reference(problem, axes, list(inputs.values()), args.device)
                times[mode].append(time.perf_counter() - t0)
    nbytes = sum(v.numel() * v.element_size() for v in inputs.values() if hasattr(v, "numel"))
    out: dict[str, Any] = {"problem": problem.name, "workload": workload.name, "device": args.device,
                           "input_bytes": nbytes, "calls": args.calls}
    for name, values in (("send", sends), ("reference", times)):
        med = {k: round(statistics.median(v), 4) for k, v in values.items()}
        out[name] = {"median_s": med, "reused_over_fresh": round(med["reused_file"] / med["fresh_file"], 3),
                     "samples_s": {k: [round(x, 4) for x in v] for k, v in values.items()}}
    print(json.dumps(out, indent=1))
    if args.output:
        Path(args.output).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
