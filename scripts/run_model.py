"""Run a model's decoder layer at the model view's scenarios: every layer op and the whole-layer problem.

    python scripts/run_model.py llama3_1_8b -o results/h200/model.jsonl --include 'torch_eager*' 'triton_tma_*' \
        --scenario decode:1:8192 decode:64:8192 prefill:8192

Each problem runs only the workload at each scenario (found by its axes, as `solbench model` finds the
records), so one call makes everything `solbench model FAMILY` needs for those scenarios.
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
from collections import Counter
from pathlib import Path

from run_library import LineProgress  # scripts/ is on the path when a script runs

from solbench.api import plan_run, resolve_options, run_plan
from solbench.data.library import problems_root
from solbench.data.problem import find_problems, load_problem
from solbench.data.results import read_records
from solbench.data.rollup import RollupError, in_phase, layer_problems, scenario, workload_at
from solbench.errors import SolbenchError
from solbench.present.model_view import WHOLE_LAYER_TAG


def parse_scenario(text: str):
    """``decode:BATCH:CONTEXT`` or ``prefill:TOKENS[:BATCH]``."""
    phase, *nums = text.split(":")
    try:
        values = [int(n) for n in nums]
        if phase == "decode" and len(values) == 2:
            return scenario(values[0], "decode", context=values[1])
        if phase == "prefill" and len(values) in (1, 2):
            return scenario(values[0], "prefill", batch=values[1] if len(values) == 2 else None)
    except ValueError:
        pass
    raise SolbenchError(f"--scenario {text}: use decode:BATCH:CONTEXT or prefill:TOKENS[:BATCH]")


def scenario_plan(family: str, scenarios, include: list[str], problems_dir: Path | None = None):
    """One plan item per problem (layer ops, then the whole layer): its workloads at the scenarios, its
    shipped candidates whose file names match ``include``."""
    folder = problems_root(problems_dir) / family
    loaded = [load_problem(p) for p in find_problems(folder)]
    chosen = layer_problems(loaded, family) + [p for p in loaded if WHOLE_LAYER_TAG in p.tags]
    items = []
    for item in plan_run(chosen):
        names = set()
        for sc in scenarios:
            try:
                w = workload_at(item.problem, sc) if in_phase(item.problem, sc.phase) else None
            except RollupError:
                w = None
            if w is not None:
                names.add(w.name)
        item.workloads = [w for w in item.workloads if w.name in names]
        item.candidates = [c for c in item.candidates if any(fnmatch.fnmatch(c.path.name, g) for g in include)]
        if item.workloads and item.candidates:
            items.append(item)
    return items


def skip_passed(plan, output: str) -> None:
    """Leave out the (problem, workload, candidate) triples ``output`` already has a PASSED record of."""
    records, _ = read_records([output])
    done = {(r["problem"], r.get("workload"), r.get("solution")) for r in records if r.get("status") == "PASSED"}
    for item in plan:
        name = item.problem.name
        item.workloads = [w for w in item.workloads if any((name, w.name, c.name) not in done for c in item.candidates)]
        item.candidates = [c for c in item.candidates if any((name, w.name, c.name) not in done for w in item.workloads)]
    plan[:] = [item for item in plan if item.workloads and item.candidates]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("family")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--scenario", nargs="+", default=["decode:1:8192", "decode:64:8192", "prefill:8192"])
    ap.add_argument("--include", nargs="+", default=["torch_eager*", "triton_*"], help="candidate file-name globs")
    ap.add_argument("--problems", type=Path, default=None)
    ap.add_argument("--budget", type=float, default=0.3)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--device", default=None)
    ap.add_argument("--list", action="store_true", help="print the plan and run nothing")
    ap.add_argument("--resume", action="store_true", help="skip what the output file already has a PASSED record of")
    args = ap.parse_args(argv)
    try:
        plan = scenario_plan(args.family, [parse_scenario(s) for s in args.scenario], args.include, args.problems)
    except SolbenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.resume and Path(args.output).exists():
        skip_passed(plan, args.output)
    for item in plan:
        print(item.problem.name, [w.name for w in item.workloads], [c.name for c in item.candidates], flush=True)
    if args.list:
        return 0
    options = resolve_options(device=args.device, budget_s=args.budget, timeout_s=args.timeout)
    result = run_plan(plan, options, Path(args.output), LineProgress())
    print("statuses:", dict(Counter(r.status for r in result.records)), "->", args.output, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
