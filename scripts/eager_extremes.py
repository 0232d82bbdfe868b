"""Which shipped torch_eager candidates have a PASSED GPU record at their problem's smallest and largest workload.

    python scripts/eager_extremes.py results/h200

A record counts only if it was made with the file as shipped now (its ``solution_sha256``): a record of an
earlier version does not (issue 29's criterion). Prints one line per missing (problem, workload) and a total;
exit 0 when none is missing, 1 otherwise, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from solbench.api import plan_run
from solbench.data.problem import find_problems


def _lines(folder: Path):
    """Every JSON object line of the folder's result files (a torn or foreign line is skipped: it proves nothing)."""
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict) and "problem" in value:
                yield value


def passed_versions(folder: Path) -> dict[tuple[str, str], set[str]]:
    """(problem, workload) -> the sha256 of every torch_eager file with a PASSED GPU record there."""
    out: dict[tuple[str, str], set[str]] = {}
    for r in _lines(folder):
        if r.get("solution") == "torch_eager" and r.get("status") == "PASSED" and r.get("device_type") == "cuda":
            out.setdefault((r["problem"], r.get("workload")), set()).add(r.get("solution_sha256"))
    return out


def missing_extremes(problems: Path, folder: Path) -> tuple[int, list[str]]:
    """How many extremes have a record of the shipped eager, and a line for each that has none."""
    passed, found, lines = passed_versions(folder), 0, []
    for item in plan_run(find_problems(problems), log=lambda line: None):
        eager = next((c for c in item.candidates if c.name == "torch_eager"), None)
        if eager is None:
            continue
        by_size = sorted(item.workloads, key=lambda w: item.problem.auto_bytes(item.problem.resolve_axes(w)))
        for w in dict.fromkeys([by_size[0].name, by_size[-1].name]):
            versions = passed.get((item.problem.name, w), set())
            if eager.sha256 in versions:
                found += 1
            else:
                lines.append(f"{item.problem.name} {w}: no PASSED record of the shipped torch_eager"
                             + (" (earlier versions passed)" if versions else ""))
    return found, lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, help="folder of result files (*.jsonl)")
    ap.add_argument("--problems", type=Path, default=Path("problems"))
    args = ap.parse_args(argv)
    if not args.results.is_dir() or not args.problems.is_dir():
        print(f"error: {args.results if not args.results.is_dir() else args.problems} is not a folder", file=sys.stderr)
        return 2
    found, lines = missing_extremes(args.problems, args.results)
    for line in lines:
        print(line)
    print(f"{found} of {found + len(lines)} extremes PASSED with the shipped torch_eager")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
