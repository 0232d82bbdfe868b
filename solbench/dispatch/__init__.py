"""Runs a plan on several executors (one per GPU, N on the CPU, or Ray actors); the driver alone writes records.

An executor is a trusted process that owns one device and runs whole items, one (problem,
candidate) each, through the engine's per-item code (:meth:`solbench.engine.runner.Runner.run_item`);
it sends its records back as data. The driver schedules the items longest first, writes every
record once (a key per run, problem, workload and candidate), reruns the items of a lost executor
once, and turns what is still missing into records with a status (:mod:`solbench.dispatch.driver`).
"""

from __future__ import annotations

from solbench.dispatch.driver import run_dispatched

__all__ = ["run_dispatched"]
