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
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from solbench.data import Problem, ResultRecord, Status, Workload, problems_root, resolve_problem, small_problem
from solbench.engine.options import RunOptions, dispatched, resolve_options
from solbench.engine.runner import NullProgress, PlanItem, Progress, Runner
from solbench.errors import ProblemError, SolbenchError, did_you_mean
from solbench.settings import DEMO_CPU_BUDGET_S
from solbench.worker.candidate import (
    CandidateFile,
    describe_candidates,
    shipped_candidates,
    skipped_candidates,
    skipped_line,
    source_run_mismatch,
)

__all__ = ["DemoResult", "RunOptions", "RunResult", "demo", "plan_run", "profile_problems", "resolve_options",
           "run_interleaved", "run_plan", "run_problems"]

# The demo's problems, by name: the seed GEMM plus memory-bound ones, each skipped when absent.
DEMO_PROBLEMS = (
    "llama3_1_8b.attn_o_proj_residual",
    "llama3_1_8b.rmsnorm",
    "llama3_1_8b.swiglu",
    "llama3_1_8b.rope",
    "llama3_1_8b.fused_add_rmsnorm",
    "llama3_1_8b.embedding",
)
# On the CPU the demo runs this shipped candidate only: Triton and CuPy ones need a GPU, and
# torch.compile spends tens of seconds compiling per problem there.
CPU_DEMO_CANDIDATE = "torch_eager.py"
DEMO_MAX_PROBLEMS = 4
CPU_BIG_BYTES = 128 << 20  # a workload moving more takes seconds a call on a CPU, minutes with its rounds


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


def _as_problem(p: str | Path | Problem, problems_dir: Path | None) -> Problem:
    if isinstance(p, Problem):
        return p
    return resolve_problem(p, problems_dir)


def _select_workloads(problem: Problem, names: Sequence[str], smallest: bool) -> list[Workload]:
    chosen = [w for w in problem.workloads if not names or w.name in names]
    if smallest and chosen:
        chosen = [min(chosen, key=lambda w: problem.auto_bytes(problem.resolve_axes(w)))]
    return chosen


def _given_for(problem: Problem, given: list[CandidateFile]) -> list[CandidateFile]:
    """The given candidates as they run on ``problem``: a file that shares its name with one of the
    problem's own candidates but is another file is named by its folder (``swiglu/torch_eager``), so
    its records are never taken for the problem's own."""
    own = {f.stem: f.resolve() for f in shipped_candidates(problem.folder)}
    return [replace(c, name=_name_by_folder(c.path)) if c.name in own and own[c.name] != c.path else c
            for c in given]


def _name_by_folder(path: Path) -> str:
    folder = path.parent.parent if path.parent.name == "solutions" else path.parent
    return f"{folder.name}/{path.stem}"


def _refuse_misfits(plan: list[PlanItem]) -> None:
    """With several problems, a given file whose ``def run`` (read, never run) cannot take a problem's
    inputs is refused before anything runs: it was written for another problem."""
    misfits = [(c, item.problem, why) for item in plan for c in item.candidates if c.path.suffix == ".py"
               for why in [source_run_mismatch(c.path, list(item.problem.inputs), item.problem.name)] if why]
    if misfits:
        c, problem, why = misfits[0]
        more = f" (and {len(misfits) - 1} more such pairs)" if len(misfits) > 1 else ""
        raise SolbenchError(f"--solution {c.display_path} does not fit {problem.name}: {why}{more}; run each "
                            "file with the problems it was written for")


def _stderr_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _tell_skipped(problem: Problem, log: Callable[[str], None]) -> None:
    for path, missing in skipped_candidates(problem.folder):
        log(skipped_line(problem.name, path, missing))


def plan_run(
    problems: Sequence[str | Path | Problem],
    solutions: Sequence[str | Path] | None = None,
    *,
    workloads: Sequence[str] = (),
    smallest_workload: bool = False,
    problems_dir: Path | None = None,
    small: bool = False,
    log: Callable[[str], None] | None = None,
) -> list[PlanItem]:
    """Resolve problems, workloads and candidates (the problem's shipped solutions when none given).
    A shipped candidate left out for a missing module (``REQUIRES``) is told to ``log`` in one line
    (default: standard error), never skipped silently."""
    if not problems:
        raise SolbenchError("no problem given: pass a problem.yaml path or a name from `solbench list`")
    given = describe_candidates(solutions) if solutions else None
    plan = []
    for p in problems:
        problem = _as_problem(p, problems_dir)
        problem = small_problem(problem) if small else problem  # --small: the test_axes, one workload
        if given is None:
            _tell_skipped(problem, log or _stderr_line)
        cands = _given_for(problem, given) if given is not None else describe_candidates(
            shipped_candidates(problem.folder))
        if not cands:
            raise SolbenchError(f"{problem.name} ships no candidates under solutions/: pass --solution FILE")
        plan.append(PlanItem(problem, _select_workloads(problem, workloads, smallest_workload), cands))
    if given is not None and len(plan) > 1:
        _refuse_misfits(plan)
    known = {w.name for item in plan for w in item.problem.workloads}
    unknown = [n for n in workloads if n not in known]
    if unknown:
        hint = did_you_mean(unknown[0], known)
        raise ProblemError([f"no workload named {', '.join(map(repr, unknown))} in the given problems{hint} "
                            f"(workloads: {', '.join(sorted(known))})"])
    return [item for item in plan if item.workloads]


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
        small = cpu_small_default(problems, options.device, problems_dir, log or _stderr_line)
    plan = plan_run(problems, solutions, workloads=workloads, smallest_workload=smallest_workload, small=small,
                    log=log, problems_dir=problems_dir)
    return run_plan(plan, options, Path(output) if output else default_output(), progress)


def cpu_small_default(problems: Sequence[str | Path | Problem], device: str, problems_dir: Path | None,
                      log: Callable[[str], None]) -> bool:
    """Whether a run on ``device`` with no workload named takes each problem's ``small`` workload: on a
    CPU, when a workload moves more than CPU_BIG_BYTES (rmsnorm at T=16384 took minutes a call there);
    said in one line."""
    if device.startswith("cuda"):
        return False
    found = [_as_problem(p, problems_dir) for p in problems]
    big = [f"{p.name} {w.name}" for p in found for w in p.workloads if p.auto_bytes(p.resolve_axes(w)) > CPU_BIG_BYTES]
    if not big:
        return False
    log(f"on a CPU, each problem's small workload ({big[0]}{' and more' if len(big) > 1 else ''} would take minutes "
        "here): --all-workloads or --workload NAME to run them")
    return True


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


class _Tag:
    """A record hook that puts the current ``tag`` in each record's ``timing["interleave"]``."""

    def __init__(self) -> None:
        self.tag: dict[str, Any] | None = None

    def __call__(self, record: ResultRecord, context: object) -> None:
        if self.tag is not None:
            record.timing["interleave"] = dict(self.tag)


class _OneTotal:
    """Forwards progress but the per-item ``begin``: the interleaved run announces its total once."""

    def __init__(self, progress: Progress):
        self.inner = progress

    def begin(self, total: int) -> None:
        pass

    def task(self, problem: str, workload: str, candidate: str) -> None:
        self.inner.task(problem, workload, candidate)

    def record(self, record: ResultRecord) -> None:
        self.inner.record(record)


def _cooldown(device: str, max_wait_s: float) -> dict[str, Any]:
    """Wait for the GPU's power and clocks to recover (clockprobe.cooldown); nothing to wait for on the CPU."""
    if not device.startswith("cuda") or max_wait_s <= 0:
        return {"waited_s": 0.0, "recovered": None}
    import torch

    from solbench.timing.clockprobe import cooldown

    return cooldown(max_wait_s, device_index=torch.cuda.current_device())


def run_interleaved(plan: list[PlanItem], options: RunOptions, output: Path,
                    progress: Progress | None = None) -> RunResult:
    """Per problem and workload, run the candidates A, B, A, B, ... ``options.interleave`` times, one
    fresh worker per item, waiting (at most ``options.cooldown_max_s``) for the GPU to cool down
    between items, so that power history (compute-bound times drift +-15% with it) does not favour
    whichever candidate runs second.

    One runner serves every item: one run id and one base seed, so every round sees the same inputs.
    Each record is appended as soon as it is made, tagged ``timing["interleave"]``.
    """
    rounds, cooldown_max_s = options.interleave, options.cooldown_max_s
    if rounds < 1:
        raise SolbenchError(f"--interleave {rounds}: give the number of A, B, ... rounds (1 or more)")
    progress = progress or NullProgress()
    tag = _Tag()
    runner = Runner(options, output, _OneTotal(progress), hooks=[tag])
    progress.begin(rounds * sum(len(item.workloads) * len(item.candidates) for item in plan))
    first = True
    for item in plan:
        order = [c.name for c in item.candidates]
        for workload in item.workloads:
            for r in range(1, rounds + 1):
                for candidate in item.candidates:
                    waited = 0.0 if first else _cooldown(options.device, cooldown_max_s)["waited_s"]
                    first = False
                    tag.tag = {"round": r, "of": rounds, "order": order, "cooldown_s": round(waited, 3)}
                    runner.run([PlanItem(item.problem, [workload], [candidate])])
    return RunResult(runner.records, output, runner.run_id, runner.spec.id, options.device)


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


def demo_problems(problems_dir: Path | None = None, limit: int = DEMO_MAX_PROBLEMS) -> tuple[list[Problem], list[str]]:
    """The demo's problems found under the problems folder, and the names not found."""
    root = problems_root(problems_dir)
    found, missing = [], []
    for name in DEMO_PROBLEMS:
        try:
            found.append(resolve_problem(name, root))
        except ProblemError:
            missing.append(name)
    return found[:limit], missing


DEMO_CPU_SPEC = "cpu.yaml"  # its id: cpu_<host>_<time> (unique: never ranked with another roof)


def demo_cpu_spec(folder: Path, log: Callable[[str], None], dtypes: Sequence[str] = ("float32",)) -> tuple[Path, str]:
    """Measure this CPU's ceilings (``solbench calibrate --quick``) into ``folder``; the spec's path
    and a note saying what the demo is scored against (the roof of each of ``dtypes``, the compute
    dtypes of its problems). A built-in estimate would put every SOL near 0.001: it bounds what any
    CPU could do, not what this one does."""
    from solbench.engine.calibrate import calibrate
    from solbench.units import si

    log("measuring this CPU's ceilings first (matmul and memory bandwidth, a few seconds), to score against")
    spec, path = calibrate("cpu", folder / DEMO_CPU_SPEC, quick=True, log=lambda line: None)
    slow = spec.measured.model_dump().get("no_fast_path", {}) if spec.measured else {}
    roofs = ", ".join(f"{d} {si(spec.peak(d), 'FLOP/s')}" + (" (no fast path: the float32 rate)" if d in slow else "")
                      for d in sorted(set(dtypes)))
    return path, (f"CPU demo: SOL is against this CPU's measured ceilings ({spec.id}: {si(spec.memory_bandwidth, 'B/s')} "
                  f"memory, matmul {roofs}; {path}), not a datasheet: 1.0 = as fast as its best copy or matmul")


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


def largest_workload(problem: Problem, workloads: Sequence[Workload]) -> list[Workload]:
    """The workload that moves the most bytes (what a profile of a problem looks at first)."""
    return [max(workloads, key=lambda w: problem.auto_bytes(problem.resolve_axes(w)))] if workloads else []


def _only_candidates(plan: list[PlanItem], patterns: Sequence[str]) -> list[PlanItem]:
    """The plan with only the candidates whose name matches one of ``patterns``; at least one must."""
    import fnmatch

    for item in plan:
        item.candidates = [c for c in item.candidates if any(fnmatch.fnmatchcase(c.name, p) for p in patterns)]
    kept = [item for item in plan if item.candidates]
    if not kept:
        raise SolbenchError(f"--only {' '.join(patterns)}: no candidate of the given problems matches; candidate "
                            "names are solution file names without .py")
    return kept


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
    from solbench.engine.profiling import ProfileSettings, ProfilingRunner, find_ncu, ncu_version

    # One lane at a time: the pass under ncu runs beside no other request (it replays the kernels).
    options = resolve_options(options, **{**settings, "in_flight": 1})
    plan = plan_run(problems, solutions, workloads=workloads, log=log)
    if not workloads and not all_workloads:
        for item in plan:
            item.workloads = largest_workload(item.problem, item.workloads)
    if only:
        plan = _only_candidates(plan, only)
    out = Path(output) if output else default_output("profiles")
    exe = find_ncu(ncu)
    profile_settings = ProfileSettings(exe, out.with_suffix(".ncu"), extra=tuple(ncu_options),
                                       keep_reports=keep_reports, version=ncu_version(exe))
    runner = ProfilingRunner(options, out, profile_settings, progress or NullProgress())
    records = runner.run(plan)
    return RunResult(records, out, runner.run_id, runner.spec.id, options.device)

