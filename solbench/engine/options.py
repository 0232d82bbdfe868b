"""The settings of one run (`solbench run`, `solbench.run_problems`): declared, defaulted and validated here only."""

from __future__ import annotations

import os
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from solbench.errors import SolbenchError, error_message
from solbench.settings import BUDGET_S, CALL_TIMEOUT_S, COMPILE_TIMEOUT_S, COOLDOWN_MAX_S, LOG_BYTES, PROBLEM_TIMEOUT_S
from solbench.timing import TimingConfig

MIN_ROUNDS = 3
# The flag a record of a run without the guards carries (``RunOptions.guards`` off).
GUARDS_OFF_FLAG = "guards-off"
_SECONDS = ("timeout_s", "compile_timeout_s", "budget_s", "problem_timeout_s")
_USER = re.compile(r"[a-z_][a-z0-9_.-]{0,31}\$?|\d{1,10}(:\d{1,10})?", re.IGNORECASE)


def default_device() -> str:
    """cuda when torch sees a GPU, else cpu."""
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


def default_worker_user() -> str:
    """The user workers and the problem host run as when solbench is root: $SOLBENCH_WORKER_USER, else nobody."""
    return os.environ.get("SOLBENCH_WORKER_USER", "nobody")


def default_problem_timeout() -> float:
    """Seconds one call of a problem's own code may take: $SOLBENCH_PROBLEM_TIMEOUT_S, else PROBLEM_TIMEOUT_S (settings)."""
    text = os.environ.get("SOLBENCH_PROBLEM_TIMEOUT_S", "")
    try:
        value = float(text) if text else PROBLEM_TIMEOUT_S
    except ValueError:
        raise SolbenchError(f"SOLBENCH_PROBLEM_TIMEOUT_S={text[:40]!r}: give a number of seconds") from None
    if not value > 0:
        raise SolbenchError(f"SOLBENCH_PROBLEM_TIMEOUT_S={text[:40]!r}: give a positive number of seconds")
    return value


def default_workers_ahead() -> int:
    """A quarter of the cores, at most 4: none on small machines, where the workers' imports would
    compete with the timed candidate for the CPU."""
    from solbench.engine.environment import cpu_count

    return max(0, min(4, cpu_count() // 4))


class RunOptions(BaseModel):
    """How a run checks, times and scores. Frozen: build a new one (:func:`resolve_options`) to change it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    device: str = Field(default_factory=default_device,
                        description="cuda, cuda:N or cpu (default: cuda when torch sees a GPU, else cpu)")
    gpu: str | None = Field(None, description="spec id or spec file to score against (default: detected on CUDA, "
                                              "a built-in upper-bound estimate on the CPU)")
    timeout_s: float = Field(CALL_TIMEOUT_S, description="seconds per workload and candidate, after the first call of a "
                                                "fresh worker, before the worker is killed")
    compile_timeout_s: float = Field(COMPILE_TIMEOUT_S, description="seconds for a worker's start, the candidate's import "
                                                        "and its first call (once: after a first call that ran "
                                                        "out of it, the candidate's next workers get timeout_s)")
    problem_timeout_s: float = Field(default_factory=default_problem_timeout,
                                     description="seconds one call of a problem's own code (input generator, "
                                                 "reference, cost hook) may take in its sandboxed host before the "
                                                 "host is stopped and the run ends with one line "
                                                 "(default $SOLBENCH_PROBLEM_TIMEOUT_S, else 300)")
    budget_s: float = Field(BUDGET_S, description="timing budget per workload, seconds")
    rounds: int = Field(MIN_ROUNDS, description=f"correctness rounds per workload (>= {MIN_ROUNDS}), fresh inputs each")
    warm_shapes: bool = Field(True, description="on a GPU, a candidate that may compile per shape (torch.compile, "
                                                "Triton) is first called once on each workload's inputs, "
                                                "untimed and unchecked, before its first timing (solbench.engine.warm)")
    edge_rounds: bool = Field(True, description="after the timing, the edge rounds from each input's value domain "
                                                "(large, offset, tiny, zeros, specials, layouts: solbench.engine.edge); "
                                                "off only to measure what they cost")
    seed: int | None = Field(None, description="base seed of the inputs (default: random, kept secret; never give "
                                               "one for untrusted code)")
    log_bytes: int = Field(LOG_BYTES, description="most bytes of the candidate's own output (what its worker printed, "
                                             "control characters removed) kept in a record's log; 0 leaves it out")
    worker_user: str = Field(default_factory=default_worker_user,
                             description="when solbench runs as root, the user the workers and the problem "
                                         "host (and all they start) run as: a name or uid[:gid] (default $SOLBENCH_WORKER_USER, else "
                                         "nobody); root keeps root (never for untrusted code)")
    worker_reads: tuple[str, ...] = Field((), description="more folders the workers may read, besides the Python "
                                                          "installation, system libraries and the candidate's folder")
    timing_method: str = Field("auto", description="auto, events, graph (CUDA) or cpu")
    workers_ahead: int = Field(default_factory=default_workers_ahead,
                               description="workers started (importing torch) while another candidate runs "
                                           "(default: by core count)")
    in_flight: int = Field(0, description="(problem, candidate) lanes in flight at once: their starts, compiles, "
                                          "inputs, references and checks overlap; only timing windows are "
                                          "exclusive (0: half the cores, 1 to 8; 1: one at a time)")
    interleave: int = Field(0, description="run the candidates A, B, A, B, ... this many rounds per workload, "
                                           "a record each, so power history does not pick the winner (0: off)")
    cooldown_max_s: float = Field(COOLDOWN_MAX_S, description="with interleave: most seconds to wait between items for the "
                                                    "GPU's power and clocks to recover")
    all_streams: bool = Field(True, description="CUDA: a call's time is every stream's work, from CUPTI activity "
                                                "records (events on the timed stream become the cross-check); off: "
                                                "events only, blind to work on other streams")
    guards: bool = Field(True, description="the reward-hacking guards (solbench.guards); off only to measure what "
                                           "they add, never for untrusted code: records are flagged guards-off")
    jit_cache: str | None = Field(default_factory=lambda: os.environ.get("SOLBENCH_JIT_CACHE") or None,
                                  description="folder where each candidate's JIT caches (Triton, Inductor, CuPy, CUDA) "
                                              "are kept between runs, one per candidate source, problem, device and "
                                              "compiler versions; a candidate only loads its own (default "
                                              "$SOLBENCH_JIT_CACHE, else none: every worker compiles afresh)")
    transport: str = Field("auto", description="how inputs and outputs move between the parent and a worker: device "
                                               "(GPU memory shared by CUDA VMM, never through the host), memfd (through "
                                               "host shared memory; the CPU's route), or auto (device when available)")
    gpus: str | None = Field(None, description="run on these local GPUs, one executor each: all, or 0,1,... "
                                               "(items longest first; the driver alone writes the results)")
    jobs: int = Field(0, description="run on N executors on the CPU (with --device cpu; 0: the plain run)")
    cluster: str | None = Field(None, description="run on a Ray cluster: ray (a local instance) or "
                                                  "ray://HOST:PORT; one executor per GPU of the cluster "
                                                  "(--jobs N executors with --device cpu)")

    @model_validator(mode="wrap")
    @classmethod
    def _one_line(cls, data: Any, handler: Any) -> RunOptions:
        """A malformed setting is a user error on one line, not pydantic's report."""
        try:
            return handler(data)
        except ValidationError as err:
            first = err.errors()[0]
            name = ".".join(str(p) for p in first["loc"]) or "run options"
            if first["type"] == "extra_forbidden":
                raise SolbenchError(f"unknown run setting {name!r}: use one of {', '.join(cls.model_fields)}") from None
            raise SolbenchError(f"run setting {name}: {error_message(first)}") from None

    @field_validator("jit_cache", mode="before")
    @classmethod
    def _folder(cls, value: Any) -> Any:
        """Resolved once here (``~`` expanded, made absolute): every executor gets the same store."""
        if isinstance(value, (str, os.PathLike)) and os.fspath(value):
            return os.path.abspath(os.path.expanduser(os.fspath(value)))
        return value

    @model_validator(mode="after")
    def _check(self) -> RunOptions:
        _check_device(self.device)
        if self.rounds < MIN_ROUNDS:
            raise SolbenchError(f"--rounds {self.rounds}: at least {MIN_ROUNDS} correctness rounds are needed")
        if self.workers_ahead < 0:
            raise SolbenchError("--workers-ahead must be 0 or more")
        if self.in_flight < 0:
            raise SolbenchError("--in-flight must be 0 (by core count) or more")
        for name in _SECONDS:
            if not getattr(self, name) > 0:
                raise SolbenchError(f"{name.removesuffix('_s')} must be a positive number of seconds")
        if self.log_bytes < 0:
            raise SolbenchError(f"--log-bytes {self.log_bytes}: give 0 or more (0 leaves the log out)")
        if not _USER.fullmatch(self.worker_user):
            raise SolbenchError(f"--worker-user {self.worker_user!r}: give a user name or uid[:gid]")
        if self.interleave < 0:
            raise SolbenchError(f"--interleave {self.interleave}: give the number of A, B, ... rounds (0: off)")
        if self.cooldown_max_s < 0:
            raise SolbenchError(f"--cooldown {self.cooldown_max_s}: give the most seconds to wait, 0 or more")
        if self.jit_cache is not None:
            _check_jit_cache(self.jit_cache)
        timing_config(self, None).validate()
        _check_transport(self.transport, self.device)
        _check_placement(self)
        return self


def _check_jit_cache(folder: str) -> None:
    """The JIT-cache store is a folder this process can make and write (made here, private)."""
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise SolbenchError(f"--jit-cache {folder}: not a folder; give a folder for the caches")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    except OSError as err:
        raise SolbenchError(f"--jit-cache {folder}: cannot make it ({err.strerror}); give a writable folder") from None
    if not os.access(folder, os.W_OK):
        raise SolbenchError(f"--jit-cache {folder}: not writable; give a writable folder")


def _check_device(device: str) -> None:
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise SolbenchError(f"device {device!r}: use cpu, cuda or cuda:N")
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise SolbenchError("no CUDA device is available here: use --device cpu")


_GPUS = re.compile(r"all|\d{1,4}(,\d{1,4})*")


def _check_placement(options: RunOptions) -> None:
    """Where a run's executors go: --gpus, --jobs and --cluster fit the device and each other."""
    cuda = options.device.startswith("cuda")
    if options.gpus is not None and not _GPUS.fullmatch(options.gpus):
        raise SolbenchError(f"--gpus {options.gpus}: give all, or GPU indices like 0,1")
    if options.gpus is not None and options.device != "cuda":
        raise SolbenchError(f"--gpus runs one executor per GPU: use it with --device cuda, not {options.device}")
    if options.jobs < 0 or (options.jobs and cuda):
        raise SolbenchError(f"--jobs {options.jobs}: N executors on the CPU, with --device cpu (GPUs: --gpus)")
    if options.cluster is not None and options.cluster != "ray" and not options.cluster.startswith("ray://"):
        raise SolbenchError(f"--cluster {options.cluster}: use ray (a local Ray instance) or ray://HOST:PORT")
    if options.cluster is not None and options.gpus not in (None, "all"):
        raise SolbenchError("--cluster uses every GPU of the cluster: leave out --gpus")
    if options.interleave and dispatched(options):
        raise SolbenchError("--interleave runs on one device: leave out --gpus, --jobs and --cluster")


def dispatched(options: RunOptions) -> bool:
    """Whether the run goes to executors (solbench.dispatch) rather than the plain, in-process loop."""
    return bool(options.gpus or options.jobs or options.cluster)


TRANSPORTS = ("auto", "device", "memfd")


def _check_transport(transport: str, device: str) -> None:
    if transport not in TRANSPORTS:
        raise SolbenchError(f"--transport {transport}: use {', '.join(TRANSPORTS)}")
    if transport == "device" and not device.startswith("cuda"):
        raise SolbenchError(f"--transport device shares GPU memory: use it with a CUDA device, not {device} "
                            "(or --transport auto)")


def resolve_transport(options: RunOptions) -> tuple[str, str | None]:
    """The route the run's workers use, ``device`` or ``memfd``, and why auto chose memfd on a CUDA run.

    A device route asked for but not available here is a user error that names what is missing."""
    if options.transport == "memfd" or not options.device.startswith("cuda"):
        return "memfd", None
    from solbench.worker import device_index, unsupported

    why = unsupported(device_index(options.device))
    if why is None:
        return "device", None
    if options.transport == "device":
        raise SolbenchError(f"--transport device: {why}; use --transport auto or memfd")
    return "memfd", f"device route unavailable: {why}"


def resolve_options(options: RunOptions | None = None, **settings: Any) -> RunOptions:
    """``options`` (default: all defaults) with ``settings`` on top, validated; a setting given as None
    is not given."""
    given = {k: v for k, v in settings.items() if v is not None}
    if options is None:
        return RunOptions(**given)
    if not given:
        return options
    return RunOptions(**({k: getattr(options, k) for k in options.model_fields_set} | given))


def timing_config(options: RunOptions, l2_bytes: int | None) -> TimingConfig:
    """The timing settings every workload of the run is timed under (the L2 size from the run's spec)."""
    cuda = options.device.startswith("cuda")
    return TimingConfig(device="cuda" if cuda else "cpu", budget_s=options.budget_s, method=options.timing_method,
                        l2_bytes=l2_bytes if cuda else None, cupti=options.all_streams)
