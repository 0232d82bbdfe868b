"""Guards against reward hacking: checks that a candidate's result was earned.

Pure-ish functions the worker and the parent call (see ``docs/security.md`` for the threat model
and ``tests/adversarial/`` for the exploits each one stops):

* outputs: :func:`check_output_objects` (plain tensors with their own storage),
  :func:`check_output_stability` (nothing writes them after ``run`` returned);
* inputs: :func:`input_fingerprints` / :func:`compare_fingerprints` (mutation);
* concurrency: :func:`snapshot_concurrency` / :func:`check_concurrency` (threads and processes
  left running), :func:`become_subreaper`;
* the harness itself: :func:`timer_integrity_snapshot` / :func:`check_timer_integrity`;
* from outside the worker: :class:`Observer` (the kernel's count of CPU time, NVML's processes and
  utilisation over a window), :func:`other_process_work`, :func:`device_findings`;
* the device: :func:`poison_free_memory`, :func:`reset_persisting_l2`, :func:`check_persisting_l2`,
  :func:`synchronize_all`;
* the process: :func:`restrict_writes` (Landlock), :func:`make_undumpable`;
* the verdict: :class:`Finding`, :func:`worst` (the physics floor is the engine's:
  :func:`solbench.engine.scoring.physics_floor`).

The engine's hooks, :func:`setup_worker`, :func:`worker_findings` and :func:`worker_probe` (worker) and
:func:`review` (parent), are in :mod:`solbench.guards.hooks`.
"""

from __future__ import annotations

from solbench.guards.account import drop_privileges, parse_account, prefer_for_oom, private_view, resolve_account
from solbench.guards.concurrency import (
    ConcurrencySnapshot,
    check_concurrency,
    descendant_processes,
    snapshot_concurrency,
)
from solbench.guards.cuda import check_persisting_l2, persisting_l2_limit, poison_free_memory, reset_persisting_l2
from solbench.guards.findings import INCORRECT, REWARD_HACK, Finding, worst
from solbench.guards.fingerprints import (
    check_output_stability,
    compare_fingerprints,
    input_fingerprints,
    same_bytes,
    synchronize_all,
)
from solbench.guards.hooks import review, setup_worker, worker_findings, worker_probe
from solbench.guards.integrity import IntegritySnapshot, check_timer_integrity, timer_integrity_snapshot
from solbench.guards.memo import memoization_plan, memoization_probe
from solbench.guards.objects import check_output_objects
from solbench.guards.outside import Observer, device_findings, other_process_work
from solbench.guards.sandbox import become_subreaper, landlock_abi, make_undumpable, python_paths, restrict_writes

__all__ = [
    "INCORRECT", "REWARD_HACK", "ConcurrencySnapshot", "Finding", "IntegritySnapshot", "Observer", "become_subreaper",
    "check_concurrency", "check_output_objects", "descendant_processes", "device_findings", "other_process_work", "check_output_stability", "check_persisting_l2",
    "check_timer_integrity", "compare_fingerprints", "input_fingerprints", "landlock_abi", "make_undumpable",
    "memoization_plan", "memoization_probe", "persisting_l2_limit", "poison_free_memory", "reset_persisting_l2", "restrict_writes",
    "review", "setup_worker", "snapshot_concurrency", "synchronize_all", "timer_integrity_snapshot", "worker_findings",
    "worker_probe", "worst", "drop_privileges", "parse_account", "prefer_for_oom", "private_view", "resolve_account",
    "same_bytes", "python_paths",
]
