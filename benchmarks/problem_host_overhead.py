"""What running problems' own code in the sandboxed problem host costs: its start, and per workload the
inputs and references of a run's cases made through it against the same code run in this process.

    python benchmarks/problem_host_overhead.py [--device cpu|cuda] [--problems N] [--out FILE.json]

For each problem (the library's first N with an input generator or a cost hook, then plain ones), at its
smallest workload shrunk by ``test_axes`` on the CPU (its smallest workload on CUDA): ``prepare_cases``
with 3 rounds, in process and hosted (alternating, best of 3 each), and the cost hook on the timing sets.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from solbench.data.library import problems_root  # noqa: E402
from solbench.data.problem import find_problems, load_problem  # noqa: E402
from solbench.engine.cases import prepare_cases  # noqa: E402
from solbench.engine.problem_code import load_generator, load_reference  # noqa: E402
from solbench.engine.problem_host import new_host  # noqa: E402
from solbench.engine.work import timed_point  # noqa: E402


def _best(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _chosen(count: int) -> list:
    problems = [load_problem(f) for f in find_problems(problems_root(None))]
    coded = [p for p in problems if p.input_generator or p.cost]
    return (coded + [p for p in problems if p not in coded])[:count]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--problems", type=int, default=12)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    from solbench.data.hardware import cpu_estimate_spec

    spec = cpu_estimate_spec()
    problems = _chosen(args.problems)
    host = new_host(args.device).expect(p.folder for p in problems)
    start = time.perf_counter()
    host._client(problems[0])  # noqa: SLF001 - the start alone, timed
    rows, start_s = [], time.perf_counter() - start
    for p in problems:
        w = min(p.workloads, key=lambda w: p.auto_bytes(p.resolve_axes(w)))
        axes = p.test_axes_resolved() if args.device == "cpu" else p.resolve_axes(w)
        here_fns = (load_reference(p), load_generator(p))
        hosted_fns = host.functions(p)

        def cases(fns, p=p, w=w, axes=axes):
            return prepare_cases(p, w, base_seed=1, device=args.device, rounds=3, ref_fn=fns[0], gen_fn=fns[1],
                                 axes=axes)

        here = _best(lambda fns=here_fns: cases(fns))
        hosted = _best(lambda fns=hosted_fns: cases(fns))
        made = cases(hosted_fns)
        row = {"problem": p.name, "axes": axes, "cases": len(made.rounds) + len(made.sets),
               "case_bytes": made.rounds[0].tensor_bytes(), "in_process_s": here, "hosted_s": hosted,
               "added_s": hosted - here}
        if p.cost:
            row["cost_on_sets_s"] = _best(lambda p=p, w=w, axes=axes, made=made: timed_point(
                p, w, spec, axes, [c.inputs for c in made.sets], host))
        rows.append(row)
        print(json.dumps(row), flush=True)
    host.close()
    added = sorted(r["added_s"] for r in rows)
    summary = {"device": args.device, "machine": platform.node(), "host_start_s": start_s, "problems": rows,
               "added_per_workload_s": {"median": added[len(added) // 2], "max": added[-1]}}
    print(json.dumps({k: v for k, v in summary.items() if k != "problems"}))
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
