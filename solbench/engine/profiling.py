"""`solbench profile`: the run of :mod:`solbench.engine.runner`, plus one call of each passing candidate
under Nsight Compute, whose counters become the record's ``profile``.

For each (candidate, workload) the record is made exactly as ``solbench run`` makes it (the same
worker, checks, timer and verdict; no profiler anywhere near the timing). A second worker runs
*under* ``ncu`` (:attr:`CandidateSlot.launcher`): once the guarded run's timing and burst are done,
it loads the candidate, runs its setup if it has one and makes a warm-up call (compiling, autotuning)
on the first round's inputs, beside the rest of the guarded run; when that run passed, a ``profile``
call on the second round's inputs, the only one between cudaProfilerStart and cudaProfilerStop
(``ncu --profile-from-start off``), so neither the harness's own kernels nor the warm-up are
profiled. Both calls' outputs are checked against the reference like any round. The profiled call
holds the run's device gate alone, the rest of the pass holds it shared.
ncu runs with ``--clock-control none`` (clocks as they are, as in the timed run) and its default
``--cache-control all`` (caches flushed before each kernel, as the timer's cold L2).

The profile worker keeps the run's isolation: its own process, session and folder, the same user,
Landlock and seccomp rules, except that local TCP stays open (ncu's injected library reports to
its front end over it). Findings of the guards in this worker are not verdicts (the profiler's own
threads run in it); the record's status and time are the guarded run's.

The report (``.ncu-rep``) is exported with ``ncu --import R --page raw --csv --print-units base``;
the CSV, compressed, is kept beside the results (``<results>.ncu/``), the report itself only on request.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from solbench.data import (
    NcuFormatError,
    Problem,
    Profile,
    ResultRecord,
    RooflinePoint,
    Status,
    Workload,
    failed_profile,
    parse_raw_csv,
    profile_from_kernels,
)
from solbench.engine.cases import Case, WorkloadCases, message_bytes
from solbench.engine.correctness import check_outputs
from solbench.engine.evaluation import CandidateSlot, EvaluationContext, failure_from_reply, failure_from_worker
from solbench.engine.ledger import Ledger
from solbench.engine.pipeline import record_bytes
from solbench.engine.runner import PlanItem, Runner
from solbench.engine.scoring import Evaluation
from solbench.errors import SolbenchError
from solbench.settings import NCU_EXPORT_TIMEOUT_S, NCU_REPORT_WAIT_S, NCU_VERSION_TIMEOUT_S
from solbench.worker import CandidateFile, WorkerFailure, WorkerStartError, memory_retried

# What ncu collects: exactly the metrics the profile reads (solbench.data.profile), named outright, and
# no section: a section brings every metric of its tables, each costing replay passes of every
# kernel. Each name is one ncu 2025.3 accepts on the H200 (tests/engine/test_profiling.py checks them
# against tests/fixtures/ncu); launch__* are launch attributes, read without a replay.
SECTIONS: tuple[str, ...] = ()
METRICS = ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum",
           "l1tex__t_bytes.sum", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
           "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
           "sm__inst_issued.avg.pct_of_peak_sustained_elapsed", "lts__throughput.avg.pct_of_peak_sustained_elapsed",
           "l1tex__throughput.avg.pct_of_peak_sustained_active", "sm__warps_active.avg.pct_of_peak_sustained_active",
           *(f"smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum" for p in "dfh" for op in ("add", "mul", "fma")),
           "sm__ops_path_tensor_src_bf16_dst_fp32.sum", "sm__ops_path_tensor_src_fp16.sum",
           "sm__ops_path_tensor_src_tf32_dst_fp32.sum", "sm__ops_path_tensor_src_fp8.sum",
           "sm__ops_path_tensor_src_fp64.sum", "sm__ops_path_tensor_src_int8.sum",
           "dram__bytes.sum.peak_sustained", "dram__cycles_elapsed.avg.per_second", "lts__t_bytes.sum.peak_sustained",
           "lts__cycles_elapsed.avg.per_second", "l1tex__t_bytes.sum.peak_sustained",
           "l1tex__cycles_elapsed.avg.per_second", "launch__registers_per_thread", "launch__grid_size",
           "launch__block_size", "launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic")
# Devices a profile can be taken on: Nsight Compute profiles CUDA kernels (the tests widen this to
# run the whole path on the CPU under a stand-in ncu).
PROFILED_DEVICES = ("cuda",)
# One replayed call: only the call between cudaProfilerStart and Stop is profiled, each of its kernels
# replayed alone (kernel replay: no re-run of the worker), caches flushed before each pass.
BASE_OPTIONS = ("--target-processes", "all", "--profile-from-start", "off", "--clock-control", "none",
                "--cache-control", "all", "--replay-mode", "kernel")
NCU_PLACES = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu")
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


class ProfilerError(SolbenchError):
    """Nsight Compute is not here, or not usable."""


def find_ncu(explicit: str | None = None) -> str:
    """The ncu executable: ``explicit``, else $SOLBENCH_NCU, else ``ncu`` on PATH, else CUDA's usual places."""
    for candidate in (explicit, os.environ.get("SOLBENCH_NCU"), shutil.which("ncu"), *NCU_PLACES):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return str(Path(candidate).resolve())
        if explicit and candidate == explicit:
            raise ProfilerError(f"--ncu {explicit}: no executable there; pass the path of Nsight Compute's ncu")
    raise ProfilerError("Nsight Compute (ncu) not found: install it (CUDA toolkit) or pass --ncu PATH "
                        "(or set $SOLBENCH_NCU)")


@dataclass
class ProfileSettings:
    """How `solbench profile` runs ncu and where it keeps what ncu wrote."""

    ncu: str
    raw_dir: Path
    sections: tuple[str, ...] = SECTIONS
    metrics: tuple[str, ...] = METRICS
    extra: tuple[str, ...] = ()  # more ncu options (--ncu-option)
    keep_reports: bool = False
    version: str | None = field(default=None)

    def options(self) -> list[str]:
        """ncu's options, as recorded in each profile."""
        sections = [a for s in self.sections for a in ("--section", s)]
        metrics = ["--metrics", ",".join(self.metrics)] if self.metrics else []
        return [*BASE_OPTIONS, *sections, *metrics, *self.extra]

    def command(self, report: Path) -> tuple[str, ...]:
        """The launcher the profile worker runs under, writing ``report`` (.ncu-rep)."""
        return (self.ncu, *self.options(), "--force-overwrite", "--export", str(report))


def ncu_version(ncu: str) -> str | None:
    """The version line ncu prints (``Version 2025.3.1.0 ...``), or None."""
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=NCU_VERSION_TIMEOUT_S).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    return lines[-1] if lines else None


def export_raw(ncu: str, report: Path, timeout_s: float = NCU_EXPORT_TIMEOUT_S) -> str:
    """The report's raw page as CSV, every value in base units."""
    try:
        done = subprocess.run([ncu, "--import", str(report), "--page", "raw", "--csv", "--print-units", "base"],
                              capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError) as err:
        raise ProfilerError(f"ncu --import {report.name}: {err}") from None
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ProfilerError(f"ncu --import {report.name} exited with {done.returncode}: {last[0][:300]}")
    return done.stdout


def raw_name(record: ResultRecord) -> str:
    """File name (no folder) of a record's raw export: problem, workload, candidate, run id."""
    return _SAFE.sub("_", f"{record.problem}__{record.workload}__{record.solution}__{record.run_id}")


class ProfileFailure(Exception):
    """The profiled pass did not give a profile; the record stands without one."""


@dataclass
class _Pass:
    """One profiled pass: a worker under ncu for one candidate on one workload.

    Its preparation (load, setup, warm-up call) is untimed device work, holding the run's gate shared
    (:attr:`CandidateSlot.gate`): :meth:`prepare_ahead` runs it in a thread beside the rest of the
    guarded run once that run's timed requests are done. The profiled call holds the gate alone."""

    slot: CandidateSlot
    cases: WorkloadCases
    timeout_s: float
    compile_timeout_s: float
    phases: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    _thread: threading.Thread | None = None
    _error: BaseException | None = None

    def prepare(self) -> None:
        """Load, setup and the warm-up call (compiling, autotuning) on the first round's inputs, each
        checked; raises ProfileFailure."""
        clock = time.monotonic()
        try:
            failure = self.slot.ensure_worker(self.compile_timeout_s)
        except WorkerStartError as err:  # ncu exited, or the worker under it never came up
            raise ProfileFailure(f"the worker under ncu did not start: {_ncu_error(str(err))}") from None
        if failure is not None:
            raise ProfileFailure(f"{failure.status}: {failure.reason}")
        self.phases["start_s"] = time.monotonic() - clock
        if self.slot.has_setup:
            from solbench.engine.evaluation import setup_inputs

            self._request({"op": "setup", "inputs": setup_inputs(self.cases)}, None, "setup", "setup")
        first = self.cases.rounds[0]
        clock = time.monotonic()
        self._request({"op": "call", "inputs": list(first.inputs.values())}, first, "the warm-up call", "warmup")
        self.phases["warmup_call_s"] = time.monotonic() - clock

    def prepare_ahead(self, use_device: Callable[[], None] | None = None) -> None:
        """Start :meth:`prepare` in a thread (once); ``use_device`` first sets that thread's device."""
        if self._thread is None:
            self.started = time.monotonic()
            self._thread = threading.Thread(target=self._prepare_caught, args=(use_device,), name="ncu-warmup",
                                            daemon=True)
            self._thread.start()

    def _prepare_caught(self, use_device: Callable[[], None] | None) -> None:
        try:
            if use_device is not None:
                use_device()
            self.prepare()
        except BaseException as err:  # noqa: BLE001 - raised again in the caller's thread by profile()
            self._error = err

    def profile(self) -> None:
        """The preparation (waited for, or made now), then the profiled call, alone on the device;
        raises ProfileFailure."""
        clock = time.monotonic()
        if self._thread is None:
            self.started = clock
            self.prepare()
        else:
            self._thread.join()
            self.phases["warmup_wait_s"] = time.monotonic() - clock  # what the guarded run did not hide
            if self._error is not None:
                raise self._error
        rounds = self.cases.rounds
        profiled = rounds[1] if len(rounds) > 1 else rounds[0]
        clock = time.monotonic()
        self._request({"op": "profile", "inputs": list(profiled.inputs.values())}, profiled, "the profiled call",
                      "profile")
        self.phases["profiled_call_s"] = time.monotonic() - clock

    def abandon(self) -> None:
        """Stop the worker (ending a preparation in flight) and wait for the preparation's thread."""
        client, thread = self.slot.client, self._thread
        if thread is not None and thread.is_alive() and client is not None:
            client.close()  # its request in flight fails at once
        if thread is not None:
            thread.join()
        self.slot.retire()

    def _request(self, header: dict, case: Case | None, phase: str, kind: str) -> None:
        """One request, holding the gate as ``kind`` (shared, or alone for the profiled call), then its
        outputs checked against the reference."""
        problem, axes = self.cases.problem, self.cases.axes
        header["expect"] = [{"shape": list(problem.shape(n, axes) or ()), "dtype": s.dtype}
                            for n, s in problem.outputs.items()]
        client = self.slot.client
        assert client is not None
        limit = self.compile_timeout_s if kind != "profile" else self.timeout_s + NCU_REPORT_WAIT_S
        try:
            with self.slot.access(kind, long=kind != "profile"):
                reply = client.request(header, limit, message_bytes([case]) if case else 4096)
        except WorkerFailure as err:
            raise ProfileFailure(failure_from_worker(err, phase, f"{limit:g} s").reason) from None
        if reply.get("ok") is not True:
            raise ProfileFailure(failure_from_reply(reply, phase).reason)
        if case is not None:
            tol = self.cases.tolerance
            check = check_outputs(reply.get("outputs"), case.expected, self.slot.device.split(":")[0], tol.atol,
                                  tol.rtol, tol.max_mismatch_ratio)
            if not check.passed:
                raise ProfileFailure(f"{phase} under the profiler: {check.reason}")


def under_ncu(slot: CandidateSlot, settings: ProfileSettings) -> Path:
    """Make ``slot`` (a fresh one) run its worker under ncu; returns the report ncu will write. The
    worker may then be spawned at once (it imports torch while the guarded run of the same item goes
    on); nothing is profiled before the profiled call's cudaProfilerStart."""
    settings.raw_dir.mkdir(parents=True, exist_ok=True)
    # Absolute: ncu runs in the worker's folder (its cwd), where a relative path does not exist. Named
    # once the record is known (the record's run id and candidate): a unique name until then.
    report = (settings.raw_dir / f"pending_{uuid.uuid4().hex}.ncu-rep").resolve()
    slot.launcher = settings.command(report)
    return report


@dataclass
class _Profiled:
    """A profiled call done: what the worker's exit, ncu's report and its export need (:func:`finish_profile`)."""

    report: Path
    name: str
    pid: int | None
    settings: ProfileSettings
    compute_dtype: str
    run: _Pass


def profiled_pass(slot: CandidateSlot, cases: WorkloadCases, settings: ProfileSettings, record: ResultRecord,
                  timeout_s: float, compile_timeout_s: float, report: Path | None = None,
                  run: _Pass | None = None) -> _Profiled | Profile:
    """The device part of a profile: one call of ``slot``'s candidate under ncu (``slot`` is a fresh one,
    or one :func:`under_ncu` prepared, whose ``report`` it writes; ``run``, its pass, may be prepared
    already). A failed profile (the slot retired) where that failed; else what :func:`finish_profile`
    needs (the worker still to exit, ncu still to write its report)."""
    report = report or under_ncu(slot, settings)
    run = run or _Pass(slot, cases, timeout_s, compile_timeout_s)
    try:
        run.profile()
        pid = slot.client.worker_pid if slot.client else None
    except (ProfileFailure, ProfilerError, OSError) as err:
        run.abandon()
        report.unlink(missing_ok=True)
        return failed_profile(one_line_reason(str(err)), **_common(settings))
    except BaseException:
        run.abandon()
        report.unlink(missing_ok=True)
        raise
    return _Profiled(report, raw_name(record), pid, settings, cases.problem.compute_dtype, run)


def _report_written(done: _Profiled, entered: threading.Event | None = None) -> None:
    """The worker told to exit and ncu's report waited for (ncu writes it once the worker is gone),
    holding the gate shared (``entered`` is set once it is held): the candidate's code stays beside no
    timing while it lives. The slot retired."""
    slot, step = done.run.slot, time.monotonic()
    try:
        with slot.access("profile_exit"):
            if entered is not None:
                entered.set()
            if slot.client is not None:
                slot.client.finish(NCU_REPORT_WAIT_S)
            if not done.report.is_file():
                raise ProfileFailure(f"ncu wrote no report: {_log_tail(slot)}")
    finally:
        if entered is not None:
            entered.set()
        slot.retire()
    done.run.phases["report_s"] = time.monotonic() - step


def finish_profile(done: _Profiled | Profile, entered: threading.Event | None = None) -> Profile:
    """The host part of a profile: the worker's exit, ncu's report, exported, parsed and kept (no
    device work: it runs while the next item is measured; ``entered``: as :func:`_report_written`)."""
    if isinstance(done, Profile):
        return done
    settings, report = done.settings, done.report
    try:
        _report_written(done, entered)
    except (ProfileFailure, OSError) as err:
        report.unlink(missing_ok=True)
        return failed_profile(one_line_reason(str(err)), **_common(settings))
    step = time.monotonic()
    try:
        text = export_raw(settings.ncu, report)
        done.run.phases["export_s"] = time.monotonic() - step
        kernels = [k for k in parse_raw_csv(text) if done.pid is None or k.process_id in (None, done.pid)]
        raw = settings.raw_dir / f"{done.name}.csv.gz"
        with gzip.open(raw, "wt", encoding="utf-8") as fh:
            fh.write(text)
    except (ProfilerError, NcuFormatError, OSError) as err:
        return failed_profile(one_line_reason(str(err)), **_common(settings))
    finally:
        if not settings.keep_reports:
            report.unlink(missing_ok=True)
        elif report.is_file():
            report.replace(settings.raw_dir / f"{done.name}.ncu-rep")
    if not kernels:
        return failed_profile("no kernel was profiled in the call (a candidate that launches none, or a "
                              "profiler that did not attach)", **_common(settings))
    profile = profile_from_kernels(kernels, done.compute_dtype, raw=f"{settings.raw_dir.name}/{raw.name}",
                                   process_id=done.pid, **_common(settings))
    profile.seconds = round(time.monotonic() - done.run.started, 3)
    profile.phases_s = {k: round(v, 3) for k, v in done.run.phases.items()}
    return profile


def _common(settings: ProfileSettings) -> dict[str, object]:
    return {"tool": "ncu", "tool_version": settings.version, "options": settings.options()}


def profile_call(slot: CandidateSlot, cases: WorkloadCases, settings: ProfileSettings, record: ResultRecord,
                 timeout_s: float, compile_timeout_s: float, report: Path | None = None) -> Profile:
    """The :class:`Profile` of one call of ``slot``'s candidate under ncu (:func:`profiled_pass`, then
    :func:`finish_profile`)."""
    return finish_profile(profiled_pass(slot, cases, settings, record, timeout_s, compile_timeout_s, report))


def _ncu_error(text: str) -> str:
    """ncu's own complaint in a failure's text (its ``==ERROR==`` line), else the text itself."""
    errors = [ln.strip() for ln in text.splitlines() if "==ERROR==" in ln]
    return errors[-1] if errors else text


def one_line_reason(text: str, limit: int = 300) -> str:
    """A failure's text as the one line a profile's ``reason`` holds: whitespace folded, cut at ``limit``."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _log_tail(slot: CandidateSlot) -> str:
    """The last line ncu or the worker printed (ncu prints ==ERROR== lines to the worker's log)."""
    log = slot.log(4000).strip().splitlines()
    errors = [ln for ln in log if "==ERROR==" in ln or "==WARNING==" in ln]
    return (errors or log or ["no output"])[-1][:300]


class ProfilingRunner(Runner):
    """:class:`Runner` whose records of passed candidates get a ``profile`` from a pass under ncu.

    The worker under ncu of each (problem, candidate) is started ahead: the next pair's when this pair
    begins, so its ncu start and torch import (about 6 s on the H200) overlap this pair's guarded run
    and replays and cost no wall time of their own (they launch nothing on the device before their
    load, which comes after the timed requests of their own pair).

    On the device, in the run's gate: a pair's worker under ncu loads and makes its warm-up call (shared)
    beside the rest of its guarded run (rechecks, edge rounds, verdict) once that run's timing and
    burst are done, and so are the next record's inputs and references made (another workload's, if
    they fit in memory beside this record); its profiled call holds the device alone; its exit, ncu's
    report (shared) and the export, and the guarded worker's exit (shared), run while the next pair
    starts, before that pair's timing."""

    prepares_ahead = False  # its pairs' workers under ncu are started ahead by this class

    def __init__(self, options, output, settings: ProfileSettings, progress=None):  # type: ignore[no-untyped-def]
        kwargs = {"progress": progress} if progress is not None else {}
        super().__init__(options, output, **kwargs)
        self.settings = settings
        self._pairs: list[tuple[Problem, CandidateFile]] = []
        self._ahead: dict[tuple[str, str], tuple[CandidateSlot, Path]] = {}
        # A worker's exit, its report and the export (ncu --import, ~0.8 s on the H200: host work) run
        # while the next item is measured; its record is written once the profile is in, before the
        # next record. Two threads: one pair's exit never waits behind the export before it.
        self._exports = ThreadPoolExecutor(max_workers=2, thread_name_prefix="ncu-export")
        self._warming: _Pass | None = None  # the pass of the pair in its guarded run
        # The next record's inputs and references (another workload's), made beside this record's
        # rechecks and warm-up within a memory reservation of their own (released when this record ends).
        self._order: list[tuple[Problem, Workload, CandidateFile]] = []
        self._cases_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cases-ahead")
        self._cases_ahead: dict[tuple[str, str], Future[tuple[WorkloadCases, RooflinePoint]]] = {}
        self._ahead_held = 0
        self._retiring: list[threading.Thread] = []  # lanes' guarded workers being stopped (_retire_lane)
        self._deferred: dict[int, Future[Profile]] = {}
        self._pending: tuple[ResultRecord, _Settled, Future[Profile]] | None = None
        if not self.options.device.startswith(PROFILED_DEVICES):
            raise ProfilerError("solbench profile needs a CUDA device (Nsight Compute profiles GPU kernels): "
                                "use --device cuda")

    def run(self, plan: list[PlanItem]) -> list[ResultRecord]:
        # The order Runner.run goes in: problems, their candidates, their workloads.
        self._order = [(item.problem, w, c) for item in plan for c in item.candidates for w in item.workloads]
        self._pairs = [(p, c) for p, _, c in self._order]
        try:
            records = super().run(plan)
            self._flush()
            return records
        finally:
            self._pending = None
            self._exports.shutdown(wait=True)
            self._cases_pool.shutdown(wait=True)
            for thread in self._retiring:
                thread.join()
            self._retiring.clear()
            self._cases_ahead.clear()
            self._release_ahead()
            for slot, report in self._ahead.values():
                slot.retire()
                report.unlink(missing_ok=True)
            self._ahead.clear()

    def _under_ncu(self, problem: Problem, candidate: CandidateFile) -> tuple[CandidateSlot, Path]:
        """The pair's worker under ncu, spawned (the one started ahead for it, or a new one)."""
        started = self._ahead.pop((problem.name, str(candidate.path)), None)
        if started is not None:
            return started
        opts = self.options
        reads = (str(problem.folder.resolve()), *opts.worker_reads, str(Path(self.settings.ncu).parent.parent))
        slot = CandidateSlot(candidate, opts.device, guards=opts.guards, account=self.account, reads=reads)
        report = under_ncu(slot, self.settings)
        slot.spawn()
        return slot, report

    def _start_next(self, problem: Problem, candidate: CandidateFile) -> None:
        """Spawn the worker under ncu of the pair after this one, if there is one."""
        key = (problem.name, str(candidate.path))
        keys = [(p.name, str(c.path)) for p, c in self._pairs]
        if key in keys:  # the pairs done so far are dropped: the next other pair is the one to start
            self._pairs = self._pairs[keys.index(key) + 1:]
        nxt = next(((p, c) for p, c in self._pairs if (p.name, str(c.path)) != key), None)
        if nxt is not None and (nxt[0].name, str(nxt[1].path)) not in self._ahead:
            self._ahead[(nxt[0].name, str(nxt[1].path))] = self._under_ncu(*nxt)

    def _run_one(self, slot: CandidateSlot, cases: WorkloadCases, roof: RooflinePoint) -> ResultRecord:
        opts = self.options
        # This pair's worker under ncu (started ahead, or now) and the next pair's import torch while
        # the guarded run below and this pair's replays go on.
        profiled, report = self._under_ncu(cases.problem, slot.candidate)
        self._start_next(cases.problem, slot.candidate)
        profiled.gate, profiled.owner = self.gate, f"{slot.owner}/ncu"
        self._cases_ahead.clear()  # this record took its own: any other made ahead is not taken next
        run = self._warming = _Pass(profiled, cases, opts.timeout_s, opts.compile_timeout_s)
        try:
            record = super()._run_one(slot, cases, roof)
        except BaseException:
            run.abandon()
            report.unlink(missing_ok=True)
            raise
        finally:
            self._warming = None
            self._release_ahead()  # the next record reserves its own, its cases included
        if record.status != Status.PASSED.value:
            run.abandon()
            report.unlink(missing_ok=True)
            record.profile = failed_profile(f"not profiled: the run ended {record.status}", tool="ncu")
            return record
        done = profiled_pass(profiled, cases, self.settings, record, opts.timeout_s, opts.compile_timeout_s, report,
                             run)
        if isinstance(done, Profile):
            record.profile = done
        else:
            entered = threading.Event()  # its exit holds the gate before the next pair starts
            self._deferred[id(record)] = self._exports.submit(finish_profile, done, entered)
            entered.wait()
        return record

    def _retire_lane(self, slot: CandidateSlot) -> None:
        """The lane's guarded worker stopped in a thread (its exit and CUDA teardown off the path between
        pairs) that holds the gate shared from before this returns until the worker is gone: the next
        pair makes its cases and loads meanwhile, its timing waits."""
        entered = threading.Event()

        def retire() -> None:
            try:
                with self.gate.shared(slot.owner, "retire"):
                    entered.set()
                    slot.retire()
            finally:
                entered.set()

        thread = threading.Thread(target=retire, name="retire", daemon=True)
        thread.start()
        entered.wait()
        self._retiring.append(thread)

    def _evaluate(self, slot: CandidateSlot, ctx: EvaluationContext) -> Evaluation:
        """The guarded run, whose end (after its timing and burst) the pair's worker under ncu prepares
        beside, and the next record's cases are made beside."""
        run = self._warming
        if run is not None:
            use_device = self._use_device if self.options.device.startswith("cuda") else None

            def after_timed() -> None:
                run.prepare_ahead(use_device)
                self._make_next_cases(ctx.cases, slot.candidate)

            ctx.after_timed = after_timed
        return super()._evaluate(slot, ctx)

    def _next_record(self, cases: WorkloadCases, candidate: CandidateFile) -> tuple[Problem, Workload] | None:
        """The (problem, workload) of the record after this one, unless it shares this one's cases."""
        keys = [(p.name, w.name, str(c.path)) for p, w, c in self._order]
        here = (cases.problem.name, cases.workload.name, str(candidate.path))
        if here not in keys or keys.index(here) + 1 >= len(keys):
            return None
        problem, workload, _ = self._order[keys.index(here) + 1]
        same = (problem.name, workload.name) == (cases.problem.name, cases.workload.name)
        return None if same else (problem, workload)

    def _make_next_cases(self, cases: WorkloadCases, candidate: CandidateFile) -> None:
        """Start making the next record's inputs and references in the background (shared device work,
        done before this record's profiled call holds the device alone), if they fit in memory beside it."""
        nxt = self._next_record(cases, candidate)
        if nxt is None or (nxt[0].name, nxt[1].name) in self._cases_ahead or self.cases.holds(*nxt):
            return
        problem, workload = nxt
        held = self.memory.try_acquire(record_bytes(problem, workload, self.options.rounds, self.timing.device, self.spec.l2_bytes))
        if held is None:  # no room beside this record: made in its turn
            return
        self._ahead_held += held
        self._cases_ahead[(problem.name, workload.name)] = self._cases_pool.submit(self._cases_now, problem, workload)

    def _cases_now(self, problem: Problem, workload: Workload) -> tuple[WorkloadCases, RooflinePoint]:
        if self.options.device.startswith("cuda"):
            self._use_device()  # this thread's current device: the run's
        # Short of device memory: an error (the record makes them again in its turn), not a host moved to memfd.
        with memory_retried():
            return Runner._make_cases(self, problem, workload, Ledger())

    def _make_cases(self, problem: Problem, workload: Workload, ledger: Ledger) -> tuple[WorkloadCases, RooflinePoint]:
        """The ones made ahead (waited for), else made now (also when making them ahead failed: its
        error, if it is the problem's, comes again here)."""
        ahead = self._cases_ahead.pop((problem.name, workload.name), None)
        if ahead is not None:
            try:
                return ahead.result()
            except Exception:  # noqa: BLE001 - made again below, as without the cases made ahead
                pass
        return super()._make_cases(problem, workload, ledger)

    def _release_ahead(self) -> None:
        if self._ahead_held:
            self.memory.release(self._ahead_held)
            self._ahead_held = 0

    def _emit(self, record: ResultRecord, ledger: Ledger) -> None:
        """The record before this one first (its export done); this one now, or once its export is."""
        future = self._deferred.pop(id(record), None)
        self._flush()
        if future is None:
            super()._emit(record, ledger)
        else:
            self._pending = (record, _Settled(ledger), future)

    def _flush(self) -> None:
        """Write the record whose export was pending, with its profile."""
        if self._pending is not None:
            record, ledger, future = self._pending
            self._pending = None
            record.profile = future.result()
            super()._emit(record, ledger)  # type: ignore[arg-type]


class _Settled:
    """A record's ledger as it stood when the record was done (its wall not counting the wait for its
    export, which overlaps the next item)."""

    def __init__(self, ledger: Ledger):
        self.phases = dict(ledger.phases)
        self._wall = ledger.wall()

    def wall(self) -> float:
        return self._wall
