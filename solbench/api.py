"""The engine's public API: run candidates on problems, and the demo.

    import solbench
    options = solbench.RunOptions(device="cuda", budget_s=0.5)
    result = solbench.run_problems(["llama3_1_8b.attn_o_proj_residual"], ["my_kernel.py"], options)
    for r in result.records:
        print(r.workload, r.status, r.time_s, r.sol)

Every run setting is a field of :class:`~solbench.engine.options.RunOptions` (declared and validated
there only); ``run_problems`` also takes them as keywords (``device="cuda"``), through the same
validation. The CLI commands ``solbench run`` and ``solbench demo`` are thin layers over these
functions.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from solbench.data import Problem, ResultRecord, Status
from solbench.engine import (
    CPU_BIG_BYTES,
    CPU_DEMO_CANDIDATE,
    DEMO_PROBLEMS,
    NullProgress,
    PlanItem,
    Progress,
    Runner,
    RunOptions,
    cpu_small_default,
    demo_cpu_spec,
    demo_problems,
    dispatched,
    interleave,
    largest_workload,
    only_candidates,
    plan_run,
    resolve_options,
    stderr_line,
)
from solbench.errors import SolbenchError
from solbench.settings import DEMO_CPU_BUDGET_S

__all__ = ["CPU_BIG_BYTES", "DEMO_PROBLEMS", "DemoResult", "RunOptions", "RunResult", "cpu_small_default", "demo",
           "demo_cpu_spec", "largest_workload", "plan_run", "profile_problems", "resolve_options", "run_interleaved",
           "run_plan", "run_problems"]

def default_output(kind: str = "runs") -> Path:
    """``results/runs/<date>.jsonl`` under the current folder; a demo's ``<timestamp>.jsonl`` goes to
    :func:`demo_home`, never beside a checkout's published results."""
    now = datetime.now(timezone.utc)
    if kind == "demo":
        return demo_home() / f"{now.strftime('%Y-%m-%dT%H%M%SZ')}.jsonl"
    stamp = now.strftime("%Y-%m-%d") if kind == "runs" else now.strftime("%Y-%m-%dT%H%M%SZ")
    return Path("results") / kind / f"{stamp}.jsonl"


def demo_home() -> Path:
    """Where demos write by default: ``$SOLBENCH_HOME/demo``, else ``$XDG_DATA_HOME/solbench/demo``
    (``~/.local/share/solbench/demo``)."""
    home = os.environ.get("SOLBENCH_HOME")
    if home:
        return Path(home) / "demo"
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "solbench" / "demo"


@dataclass
class RunResult:
    records: list[ResultRecord]
    output: Path
    run_id: str
    spec_id: str
    device: str

    @property
    def all_passed(self) -> bool:
        return bool(self.records) and all(r.status == Status.PASSED.value for r in self.records)


def run_problems(
    problems: Sequence[str | Path | Problem],
    solutions: Sequence[str | Path] | None = None,
    options: RunOptions | None = None,
    *,
    output: str | Path | None = None,
    workloads: Sequence[str] = (),
    smallest_workload: bool = False,
    small: bool = False,
    progress: Progress | None = None,
    log: Callable[[str], None] | None = None,
    problems_dir: Path | None = None,
    all_workloads: bool = True,
    **settings: Any,
) -> RunResult:
    """Check, time and score candidates on problems; append one record per (candidate, workload).

    ``options`` holds the run's settings (default: all defaults); ``settings`` are RunOptions fields
    given as keywords (``device="cpu"``, ``budget_s=0.1``), put on top of it and validated the same way
    (a setting given as None is not given). With ``interleave=N`` the candidates run A, B, A, B, ... N
    rounds per workload instead (see :func:`run_interleaved`): N records per (candidate, workload).
    ``all_workloads=False`` (the command line's default): on a CPU, with no workload named, each
    problem's ``small`` workload (:func:`cpu_small_default`).
    """
    options = resolve_options(options, **settings)
    if not (all_workloads or small or workloads or smallest_workload):
        small = cpu_small_default(problems, options.device, problems_dir, log or stderr_line)
    plan = plan_run(problems, solutions, workloads=workloads, smallest_workload=smallest_workload, small=small,
                    log=log, problems_dir=problems_dir)
    return run_plan(plan, options, Path(output) if output else default_output(), progress)


def run_interleaved(plan: list[PlanItem], options: RunOptions, output: Path,
                    progress: Progress | None = None) -> RunResult:
    """The candidates A, B, A, B, ... ``options.interleave`` rounds per workload
    (:func:`solbench.engine.interleave.run_interleaved`)."""
    runner = interleave.run_interleaved(plan, options, output, progress)
    return RunResult(runner.records, output, runner.run_id, runner.spec.id, options.device)


def run_plan(plan: list[PlanItem], options: RunOptions, output: Path, progress: Progress | None = None) -> RunResult:
    """Run a resolved plan (see :func:`plan_run`) with explicit options (interleaved when they say so)."""
    if options.interleave:
        return run_interleaved(plan, options, output, progress)
    if dispatched(options):  # --gpus, --jobs, --cluster: executors run the items, this process writes
        from solbench.dispatch import run_dispatched

        done = run_dispatched(plan, options, output, progress)
        return RunResult(done.records, output, done.run_id, done.spec_id or "", options.device)
    runner = Runner(options, output, progress or NullProgress())
    records = runner.run(plan)
    return RunResult(records, output, runner.run_id, runner.spec.id, options.device)


@dataclass
class DemoResult:
    """What ``solbench demo`` ran; the presentation layer adds its leaderboard and chart from here."""

    records_path: Path
    run: RunResult
    problems: list[str]
    skipped: list[str] = field(default_factory=list)  # demo problems not found
    notes: list[str] = field(default_factory=list)  # what was left out and why, for the user

    @property
    def records(self) -> list[ResultRecord]:
        return self.run.records


def demo(
    device: str | None = None,
    output: str | Path | None = None,
    *,
    options: RunOptions | None = None,
    problems_dir: Path | None = None,
    progress: Progress | None = None,
    log: Callable[[str], None] | None = None,
    **settings: Any,
) -> DemoResult:
    """A few problems with their shipped candidates: on the CPU the smallest workload of each and a
    short timing budget unless one is given (a couple of minutes in all); on CUDA every workload.
    On the CPU without ``gpu``, this CPU's ceilings are measured first (:func:`demo_cpu_spec`, a few
    seconds) and the run is scored against them. ``options`` and ``settings`` (``gpu="h200_sxm"``,
    ...) as for :func:`run_problems`; ``log`` hears what is being done before the run starts."""
    options = resolve_options(options, device=device, **settings)
    device = options.device
    files, missing = demo_problems(problems_dir)
    if not files:
        raise SolbenchError(f"none of the demo problems ({', '.join(DEMO_PROBLEMS)}) were found: run from the "
                            "repository root or pass --problems DIR")
    cpu = not device.startswith("cuda")
    notes = [f"demo problem {n} not found, skipped" for n in missing]
    # on the CPU only torch_eager.py runs: a library baseline left out there is no news
    plan = plan_run(files, smallest_workload=cpu, log=(lambda line: None) if cpu else notes.append)
    if cpu:
        notes.append(f"CPU demo: the smallest workload of each problem and its shipped {CPU_DEMO_CANDIDATE} only "
                     "(run `solbench run PROBLEM --device cpu` for the others)")
        for item in plan:
            item.candidates = [c for c in item.candidates if c.path.name == CPU_DEMO_CANDIDATE]
            if not item.candidates:
                notes.append(f"{item.problem.name}: no {CPU_DEMO_CANDIDATE}, skipped on the CPU")
        plan = [item for item in plan if item.candidates]
    out = Path(output) if output else default_output("demo")
    if cpu and "budget_s" not in options.model_fields_set:
        options = resolve_options(options, budget_s=DEMO_CPU_BUDGET_S)
    if cpu and options.gpu is None:
        spec_path, note = demo_cpu_spec(out.with_suffix(""), log or (lambda line: None),
                                        [item.problem.compute_dtype for item in plan])
        options = resolve_options(options, gpu=str(spec_path))
        notes.append(note)
    run = run_plan(plan, options, out, progress)
    return DemoResult(out, run, [item.problem.name for item in plan], missing, notes)


def profile_problems(
    problems: Sequence[str | Path | Problem],
    solutions: Sequence[str | Path] | None = None,
    options: RunOptions | None = None,
    *,
    output: str | Path | None = None,
    workloads: Sequence[str] = (),
    all_workloads: bool = False,
    progress: Progress | None = None,
    ncu: str | None = None,
    ncu_options: Sequence[str] = (),
    keep_reports: bool = False,
    log: Callable[[str], None] | None = None,
    only: Sequence[str] = (),
    **settings: Any,
) -> RunResult:
    """`solbench profile`: run as :func:`run_problems` (each problem's largest workload unless
    ``workloads`` or ``all_workloads`` say otherwise), and give each passed record a ``profile``: one
    call of the candidate under Nsight Compute (:mod:`solbench.engine.profiling`). The raw exports go
    to ``<output>.ncu/`` beside the results file. ``only``: name patterns (globs) the candidates must
    match, e.g. ``("torch_eager", "triton_*")``; problems left with none are skipped."""
    from solbench.engine import ProfileSettings, ProfilingRunner, find_ncu, ncu_version

    # One lane at a time: the pass under ncu runs beside no other request (it replays the kernels).
    options = resolve_options(options, **{**settings, "in_flight": 1})
    plan = plan_run(problems, solutions, workloads=workloads, log=log)
    if not workloads and not all_workloads:
        for item in plan:
            item.workloads = largest_workload(item.problem, item.workloads)
    if only:
        plan = only_candidates(plan, only)
    out = Path(output) if output else default_output("profiles")
    exe = find_ncu(ncu)
    profile_settings = ProfileSettings(exe, out.with_suffix(".ncu"), extra=tuple(ncu_options),
                                       keep_reports=keep_reports, version=ncu_version(exe))
    runner = ProfilingRunner(options, out, profile_settings, progress or NullProgress())
    records = runner.run(plan)
    return RunResult(records, out, runner.run_id, runner.spec.id, options.device)

