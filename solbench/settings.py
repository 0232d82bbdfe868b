"""Every default solbench runs under, declared once: timeouts, waits, budgets, warm-up, cool-down, flush sizes.

The models that carry settings (``RunOptions``, ``TimingConfig``, the service's config) take their
defaults from here; modules that wait on a process read their limit from here. One name per meaning:
a worker's start and a Ray actor's start are two limits, not one ``START_TIMEOUT_S``.
Code that runs beside a candidate binds these at import (``from solbench.settings import X``), so the
integrity guard watches its own module's copy. ``tests/test_settings.py`` fails on a timeout, wait
or budget number defined anywhere else.
"""

from __future__ import annotations

# --- one run (RunOptions) ---------------------------------------------------------------------------
CALL_TIMEOUT_S = 120.0  # per workload and candidate, after the first call of a fresh worker
COMPILE_TIMEOUT_S = 600.0  # a worker's start, the candidate's import and its first call
PROBLEM_TIMEOUT_S = 300.0  # one call of a problem's own code in its host ($SOLBENCH_PROBLEM_TIMEOUT_S)
BUDGET_S = 1.0  # timing budget per workload
DEMO_CPU_BUDGET_S = 0.1  # `solbench demo` on a CPU: a few problems in seconds
COOLDOWN_MAX_S = 10.0  # most seconds to wait between interleaved items for power and clocks to recover
COOLDOWN_POLL_S = 0.05  # how often the cool-down reads NVML
CALIBRATE_COOLDOWN_S = 5.0  # `solbench calibrate`: cool-down before each dtype's GEMM
CALIBRATE_QUICK_COOLDOWN_S = 1.0  # the same with --quick
LOG_BYTES = 8192  # most bytes of a candidate's own output kept in its record

# --- timing one workload (TimingConfig; docs/timing.md) -----------------------------------------------
MIN_SAMPLES = 10  # floor of the sample count
MAX_SAMPLES = 200  # ceiling of the sample count
TARGET_REL_CI = 0.01  # stop when the 95% CI of the median is within +-1%
WARMUP_S = 0.05  # ceiling of the warm-up
WARMUP_MIN_S = 0.005  # floor of the warm-up
WARMUP_STABLE_REL = 0.02  # warm-up is over when the last 5 calls' median is this close to the 5 before
FLUSH_L2_FACTOR = 2.0  # the L2 flush writes this many times the L2's size
MIN_FLUSH_BYTES = 256 * 2**20  # the L2 flush when the L2's size is unknown (and the CUPTI cross-check's)
# Where every timed call follows an L2 flush (TimingConfig.cold_by_flush), timing sets rotate against
# caching by address only: as on the CPU, a few do (each one more is a reference to make and a set to check).
MAX_FLUSHED_TIMING_SETS = 4
GRAPH_THRESHOLD_S = 20e-6  # timing method auto picks graph below this first-estimate call time
OUTPUT_SETTLE_S = 0.002  # how long a candidate's outputs must stay unchanged after a call

# --- processes: workers, executors, tools -----------------------------------------------------------
WORKER_START_TIMEOUT_S = 300.0  # a worker's start-up (imports torch): the harness's cost, not the candidate's
# A worker started ahead and waited for later than WORKER_START_TIMEOUT_S after its start still gets this long
# to be read: it has long been up (H200 call 27, 2026-12-03: a lane that waited minutes for memory found its
# deadline passed on arrival, and the run stopped on a healthy worker it killed).
WORKER_READY_GRACE_S = 30.0
RELEASE_TIMEOUT_S = 30.0  # a worker giving its device pool and cached memory back between records
BYTECODE_TIMEOUT_S = 600.0  # the parent writing the bytecode caches its workers cannot (engine.bytecode), once
WORKER_EXIT_GRACE_S = 2.0  # how long a worker that closed its channel gets to exit on its own
WORKER_ACCEPT_POLL_S = 0.2  # how often a wait for a worker under a launcher checks the launcher is alive
EXITING_PROCESS_GRACE_S = 0.1  # time given to a process of the worker that is exiting as the reply arrives
ACTOR_START_TIMEOUT_S = 600.0  # a Ray actor waits for a free GPU and imports torch
ACTOR_STOP_TIMEOUT_S = 30.0  # a Ray actor's close and termination, each
EXECUTOR_EXIT_WAIT_S = 10.0  # a local executor process's exit after it was told to stop
EXECUTOR_JOIN_S = 60.0  # the driver's wait for an executor's thread at the end of a run
GATE_LONG_JOIN_S = 2.0  # a long request joins those in flight while the first waiting timing waited less
# A warm-up call's input set lives in the parent, the device pool and the worker, and its outputs come back:
# its reservation (solbench.engine.warm), in inputs and outputs of one call.
WARM_COPIES = 4
GATE_SLICE_S = 0.03  # after a timing window, the untimed work in flight runs this long before the next locks it
GATE_LOCKS_AT_ONCE = False  # a timing locks the other processes from threads at once (else one by one)
# A record waiting this long for device memory gets its room kept: others go in beside it only if it still fits.
# Never by default: H200 call 33 (2026-12-03, with 5 s) moved the lanes' memory waits behind the aged records
# (2,073 lane-s) and went no faster than call 31 without it (solbench.engine.pipeline.MemoryGate.age_s).
MEMORY_WAIT_AGE_S = float("inf")
FREE_POLL_S = 0.25  # how often a record waiting for free device memory reads it again (solbench.engine.pipeline)
# Lanes in flight share the parent's interpreter: a thread back from the worker waits for the GIL while
# another runs Python, up to the switch interval (5 ms by default), at every reply inside a timing window.
LANE_SWITCH_INTERVAL_S = 0.0005
# A timing window locks another worker's long request (the driver drains its device work) within this, else waits
# for the request to end as before (solbench.engine.cudalock).
PROCESS_LOCK_TIMEOUT_MS = 500
WINDOW_STOP_WAIT_S = 0.5  # the longest a timing window waits for the other workers to be stopped
TELEMETRY_JOIN_S = 1.0  # the wait for the telemetry sampler's thread when it stops
PARENT_POLL_S = 1.0  # how often an executor checks its driver is alive
GIT_TIMEOUT_S = 10.0  # one git command of the provenance
NCU_VERSION_TIMEOUT_S = 60.0  # `ncu --version`
NCU_REPORT_WAIT_S = 120.0  # ncu writes its report after the worker exits: replays are done by then
NCU_EXPORT_TIMEOUT_S = 120.0  # `ncu --import ... --page raw`

# --- the submission service (solbench serve / submit) ----------------------------------------------
SERVE_DB = "sqlite:///solbench-serve/serve.db"  # the service's database unless --db names one
SERVE_LEASE_S = 30.0  # a running submission without a heartbeat this long goes back to the queue
SERVE_POLL_S = 0.25  # how often an idle scorer looks for work
SERVE_STOP_WAIT_S = 20.0  # how long a stopping scorer waits for its jobs
SERVE_SHUTDOWN_GRACE_S = 5.0  # open event streams are closed after this long on shutdown (they would hold it)
SSE_POLL_S = 0.5  # how often a record stream looks for new records
SUBMIT_TIMEOUT_S = 60.0  # one HTTP request of `solbench submit`
SUBMIT_POLL_S = 1.0  # how often `solbench submit --wait` asks for new records
