"""The worker: the only process that runs candidate code.

Started by the parent (:mod:`solbench.worker.client`) as ``python -m solbench.worker --fd N
--parent PID [--no-guards]`` in a new session (its own process group, so a timeout kills everything
it started, and the group dies with the parent), with stdout and stderr redirected to a log file
the parent reads back size-limited. The worker imports :mod:`solbench.timing` (which binds its
timer functions) and sets up :mod:`solbench.guards` (baselines, process limits) *before* any
candidate code, then serves requests on the socket ``N``. With ``--no-guards`` (the "engine only"
comparison, ``RunOptions.guards`` off) it sets up no guard and reports no finding.

Protocol: every message is a JSON header plus raw tensor frames (:mod:`solbench.worker.wire`; nothing is
pickled). The worker sends data only; the parent decides every verdict. Requests and replies:

``hello`` (worker -> parent, once at start)
    ``{"op": "hello", "pid": int, "sandbox": {...}, "at": float}`` (``at``: its ``time.monotonic()``, when it was up)
``{"op": "load", "path": str, "device": "cpu"|"cuda"}``
    -> ``{"ok": true}`` or ``{"ok": false, "kind": "compile", "message": str}``
    (``"setup": true`` in the ok reply when the candidate defines ``setup``)
``{"op": "setup", "inputs": [value...]}``
    Calls the candidate's ``setup(*inputs)`` once, untimed, on device copies of a setup case (inputs
    from a seed of their own, never used again): planning, workspaces, autotuning. -> ``{"ok": true,
    "findings": [...]}``; the return value is discarded (docs/engine.md, "Setup outside the timed call").
``{"op": "call", "inputs": [value...], "expect": [{"shape", "dtype"}...], "layouts": [layout or null...]}``
    Runs ``run(*inputs)`` once on fresh device copies of the inputs; ``layouts`` (optional, edge rounds)
    views some of them non-contiguously (:func:`solbench.data.domain.apply_layout`).
    -> ``{"ok": true, "outputs": [output...], "inputs_after": [value...], "findings": [...]}``
    where an input bitwise equal to its copy taken before the call is ``{"kind": "unchanged"}``.
``{"op": "time", "sets": [[value...]...], "expect": [...], "config": {TimingConfig fields}, "verify": {...}}``
    Moves every set to the device (before timing), then times calls on them
    (``solbench.timing.timing_plan``). ``verify`` (optional) is the parent's checks of the timed
    calls (:class:`solbench.timing.Verify`): ``{"keep": [sample...], "edits": [{"sample", "set",
    "input", "index": int64 tensor, "values": tensor}...], "refresh": {"set": k, "inputs": [value...]}}``.
    -> ``{"ok": true, "timing": TimingResult.as_dict(), "last_outputs": [[output...] per set],
    "samples": int, "kept": [{"sample", "set", "outputs": [output...]}...], "refresh": {"set",
    "outputs"} or null, "sets_after": [[value...]...], "findings": [...]}``; ``sets_after`` compares
    each set with its copy taken before timing *plus the harness's own edits and refresh*.
``{"op": "profile", "inputs": [value...], "expect": [...]}``
    As ``call``, with the call alone between cudaProfilerStart and cudaProfilerStop (and in an NVTX
    range ``solbench.profile``): what Nsight Compute collects under ``solbench profile``.
``{"op": "burst", "calls": n, "edits": [...], "expect": [...]}``
    After a ``time`` request: ``n`` calls back to back on the sets that timing used (as it left them),
    with the parent's edits between calls; the parent clocks the request from outside
    (:mod:`solbench.worker.burst`, :mod:`solbench.engine.burst`). -> ``{"ok": true, "outputs": [[output...]
    per call], "findings": []}``.
``{"op": "burst_prepare", "calls": n, "expect": [...]}``
    Before a burst, untimed: room for its outputs, allocated and touched. -> ``{"ok": true}``.
``{"op": "prime", "config": {TimingConfig fields}}``
    Before the first ``time`` request, untimed: what the timer builds once per process (CUPTI's start,
    its delimiter kernels; :func:`solbench.timing.prime_trace`). -> ``{"ok": true}``.
``{"op": "release"}``
    Between records: the device pool shared with the parent (:mod:`solbench.worker.devwire`), the
    burst's room and this process's cached device memory go back. -> ``{"ok": true}``.
``{"op": "ping"}``
    -> ``{"ok": true}`` at once: the parent's measure of an empty request's round trip.
``{"op": "exit"}``
    The worker exits 0.

On the device route (:mod:`solbench.worker.devwire`) a request's tensors arrive as views of a GPU
pool shared with the parent (the load brings the pool; its reply adds ``"transport": "device"`` or
why not); the worker takes no copies of them, returns its outputs through the pool's reply area
and names an input after the call as ``{"$shared": j}``: the parent reads and judges it there.

Every call of ``run`` (``call``, the timed calls, the guards' memoization probe) is made by
:func:`solbench.timing.drive` from :meth:`Worker.handle`: the same frames in every phase.

A failed request replies ``{"ok": false, "kind": "runtime", "message": first [... last] line, "traceback": str}``
(the traceback also goes to the log). ``output`` is ``{"kind": "tensor", "type", "exact",
"shape", "dtype", "device", "contiguous", "aliases", "data"}`` where ``data`` (the values, on the
CPU) is present only for a plain ``torch.Tensor`` with the expected shape and dtype, so a reply's
size is bounded by what the parent expects; or ``{"kind": "other", "type": str}``.
``findings`` are worker-side observations for the parent's guards
(:func:`solbench.guards.worker_findings`; always empty with ``--no-guards``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

# Bound at import, before any candidate code: a candidate that replaces the module's function
# does not replace the comparison this worker makes (nor the hook it calls, nor the edge rounds' views).
from solbench.data import apply_layout
from solbench.guards import same_bytes, setup_worker, worker_findings, worker_probe
from solbench.timing import drive
from solbench.worker.burst import burst_plan, output_buffers, reply_arena, stage_edits

_perf_counter = time.perf_counter  # the timing request's own breakdown (diagnostic)

# Resource limits that a candidate cannot raise again (hard = soft): no core dumps from a crash,
# and a bound on what it can write to disk (its log, build caches).
_MAX_FILE_BYTES = 8 << 30


def _limit_resources() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    cap = _MAX_FILE_BYTES if hard == resource.RLIM_INFINITY else min(hard, _MAX_FILE_BYTES)
    resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap))


PR_SET_PDEATHSIG = 1
PARENT_DEATH_SIGNAL = signal.SIGUSR2  # caught (a handler checks the parent), unlike SIGKILL


def _die_with_parent(parent: int) -> Callable[[], None]:
    """If the parent dies (killed mid-run), take down this worker's whole process group and every
    process it started; return the function that kills those processes, for the worker's own exit.

    Three ways, because a candidate controls the worker's main thread: ``PR_SET_PDEATHSIG`` (the
    kernel's signal when the parent goes; its handler checks the parent really is gone, since the
    signal also comes when the parent *thread* that started the worker ends), a watchdog thread that
    polls the parent pid every half second, and the worker's exit (a parent killed while the worker
    waited for a request closes the channel: the worker then kills what it started before it exits).
    Each kills the worker's descendants (it is their subreaper, so orphans stay in view; those that
    called ``setsid`` too) and then its group. Set after the worker changed its user (a credential
    change clears the death signal) and after the process limits, so the thread is under them too.
    """
    import ctypes
    import threading
    import time

    from solbench.worker.cleanup import kill_tree

    # Bound now: the thread never looks up a name the candidate could rebind.
    sleep, getppid, killpg, getpgrp, kill_descendants = (time.sleep, os.getppid, os.killpg, os.getpgrp, kill_tree)
    me = os.getpid()

    def reap() -> None:
        kill_descendants(me, include_root=False)

    def take_down() -> None:
        reap()
        killpg(getpgrp(), signal.SIGKILL)

    def watch() -> None:
        while True:
            sleep(0.5)
            if getppid() != parent:
                take_down()

    threading.Thread(target=watch, name="solbench-parent-watch", daemon=True).start()
    signal.signal(PARENT_DEATH_SIGNAL, lambda *_: take_down() if getppid() != parent else None)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(PARENT_DEATH_SIGNAL), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the thread and the exit path remain
        pass
    if getppid() != parent:  # gone before the signal was asked for
        take_down()
    return reap


def _become_worker(user: str | None, reads: list[str]) -> dict[str, Any]:
    """First of all, guards or not: first in line for the OOM killer, the subreaper of what it
    starts, and (``user``, given when the parent is root) the unprivileged user in a private view
    (:mod:`solbench.guards.account`). A failure ends the worker with one line."""
    from solbench.guards import (
        become_subreaper,
        drop_privileges,
        parse_account,
        prefer_for_oom,
        private_view,
        python_paths,
    )

    info: dict[str, Any] = {"oom_score_adj": prefer_for_oom(), "subreaper": become_subreaper()}
    if user:
        uid, gid = parse_account(user)
        work = os.getcwd()
        try:
            info["view"] = private_view([*python_paths(), work, *reads], uid, gid, Path(work) / "shm")
            drop_privileges(uid, gid)
        except OSError as err:
            raise SystemExit(f"solbench worker: cannot run as uid {uid}: {err}") from None
    info["uid"] = os.geteuid()
    return info


class Worker:
    def __init__(self, timing: Any, findings_hook: Any = None):
        self.timing = timing
        # Bound once, before any candidate code: a candidate that replaces
        # ``solbench.guards.worker_findings`` does not replace the hook the worker calls.
        self.findings_hook = findings_hook
        self.run: Any = None
        self.setup: Any = None  # the candidate's setup(...), when it defines one
        self.device = "cpu"
        # The device route's pool (solbench.worker.devwire.WorkerPool), set by serve: while it serves a
        # request, the inputs are views of memory shared with the parent, which checks them itself.
        self.pool: Any = None
        self.timed_sets: list[list[Any]] | None = None  # the last timing's sets, for a burst after it
        self.burst_buffers: list[list[Any]] | None = None  # room for a burst's outputs (burst_prepare)
        self.reply_arena: Any = None  # the burst reply's shared-memory file, faulted in (burst_prepare)
        self.received_s = 0.0  # the last request's receipt: its bytes read and its tensors mapped (serve)

    def _shared(self, v: Any) -> int | None:
        """Which tensor of a device-route request ``v`` is, or None (not one, or another route)."""
        return self.pool.index_of(v) if self.pool is not None else None

    @property
    def _on_device_route(self) -> bool:
        return self.pool is not None and self.pool.serving

    # --- helpers -------------------------------------------------------------------------------
    def _to_device(self, values: list[Any]) -> list[Any]:
        import torch

        # A fresh copy (own, aligned allocation) for every call: inputs never share memory with
        # the message buffers or with each other. On the device route they are already that: each
        # one its own region of the pool, which holds only this worker's data.
        return [v.to(self.device, copy=True) if isinstance(v, torch.Tensor) and self._shared(v) is None else v
                for v in values]

    def _own(self, values: list[Any]) -> list[Any]:
        """Copies of the pool's tensors among ``values`` (the same values, in memory of this worker's own)."""
        import torch

        return [torch.Tensor.clone(v) if isinstance(v, torch.Tensor) and self._shared(v) is not None else v
                for v in values]

    def _laid_out(self, values: list[Any], layouts: list[Any]) -> list[Any]:
        """Each input viewed in its layout; a view of a device-route tensor is of a copy (the pool is the parent's)."""
        import torch

        return [apply_layout(torch.Tensor.clone(v) if self._shared(v) is not None else v, lay) if lay else v
                for v, lay in zip(values, layouts, strict=True)]

    def _pristine(self, values: list[Any]) -> list[Any]:
        """Device copies of the tensor inputs, taken before the call, to compare with after it (none
        on the device route: the parent compares the shared memory with its own pristine copies)."""
        import torch

        return [torch.Tensor.clone(v) if isinstance(v, torch.Tensor) and self._shared(v) is None else None
                for v in values]

    def _after(self, values: list[Any], shapes: list[Any], pristine: list[Any]) -> list[Any]:
        """The inputs after the call: ``unchanged`` when bitwise equal to the copy taken before it,
        else their values on the CPU (the parent decides); a resized input is described, not sent.

        Comparing here, on the device, spares sending GB-sized inputs back on every call. It is the
        same trust as sending them: either way this worker's own code reports what it finds.
        """
        import torch

        T = torch.Tensor  # through the class: the candidate may shadow an instance's methods
        out: list[Any] = []
        for v, shape, before in zip(values, shapes, pristine, strict=True):
            if not isinstance(v, torch.Tensor):
                out.append(v)
            elif list(v.shape) != shape:
                out.append({"kind": "resized", "shape": list(v.shape)})
            elif (j := self._shared(v)) is not None:
                out.append({"$shared": j})  # the parent reads it from the pool and judges it
            elif before is not None and same_bytes(v, before):
                out.append({"kind": "unchanged"})
            else:
                out.append(T.to(T.detach(v), "cpu"))
        return out

    @staticmethod
    def _shapes(values: list[Any]) -> list[Any]:
        return [list(v.shape) if hasattr(v, "shape") else None for v in values]

    def _sync(self) -> None:
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize()

    def _describe(self, result: Any, expect: list[dict], inputs: list[Any]) -> list[dict]:
        import torch

        if isinstance(result, (tuple, list)):
            items = list(result)
        else:
            items = [result]
        out = []
        for i, item in enumerate(items):
            if not isinstance(item, torch.Tensor):
                out.append({"kind": "other", "type": type(item).__qualname__})
                continue
            desc: dict[str, Any] = {"kind": "tensor", "type": f"{type(item).__module__}.{type(item).__qualname__}",
                                    "exact": type(item) is torch.Tensor}
            if not desc["exact"]:  # never touch a subclass's methods: they may be the candidate's
                out.append(desc)
                continue
            dtype = str(item.dtype).removeprefix("torch.")
            shape = [int(s) for s in item.shape]
            # Methods through torch.Tensor throughout: an instance attribute may shadow any of them.
            T = torch.Tensor
            desc.update(shape=shape, dtype=dtype, device=item.device.type, contiguous=T.is_contiguous(item))
            ptr = T.untyped_storage(item).data_ptr() if T.numel(item) else None
            desc["aliases"] = [j for j, v in enumerate(inputs)
                               if ptr and isinstance(v, torch.Tensor) and T.numel(v)
                               and T.untyped_storage(v).data_ptr() == ptr]
            want = expect[i] if i < len(expect) else None
            if want is not None and want["shape"] == shape and want["dtype"] == dtype:
                # Copied here, so a device error is this call's (on the device route, into the
                # reply area when the reply is encoded, still within this request).
                desc["data"] = T.detach(item) if self._on_device_route else T.detach(item).to("cpu")
            out.append(desc)
        return out

    def _findings(self, phase: str, context: dict[str, Any]) -> list[dict]:
        return list(self.findings_hook(phase, context)) if self.findings_hook else []

    # --- requests ------------------------------------------------------------------------------
    def load(self, msg: dict) -> dict:
        from solbench.worker.candidate import CandidateLoadError, check_entry_points, load_entry_points

        self.device = msg.get("device", "cpu")
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.init()
            torch.cuda.set_device(torch.device(self.device).index or 0)  # "cuda" in candidates means this one
            from solbench.timing import prewarm

            prewarm(torch.cuda.current_device())  # before the candidate's code; untimed (the load's hold is shared)
        try:
            self.run, self.setup = load_entry_points(msg["path"])
            check_entry_points(msg["path"], self.run, self.setup, msg.get("inputs"), str(msg.get("problem") or ""))
        except CandidateLoadError as err:
            if err.details:
                print(err.details, file=sys.stderr, flush=True)
            return {"ok": False, "kind": "compile", "message": err.message}
        reply = {"ok": True, "setup": self.setup is not None}
        if self.pool is not None and self.pool.active:  # the parent offered the device route with this load
            reply["transport"] = self.pool.status()
        return reply

    def call_setup(self, msg: dict) -> dict:
        """The candidate's ``setup`` on device copies of the setup case; nothing of it is sent back."""
        if self.setup is None:
            return {"ok": False, "kind": "protocol", "message": "the candidate defines no setup()"}
        args = self._to_device(msg["inputs"])
        self._sync()
        self.setup(*args)
        self._sync()
        return {"ok": True, "findings": self._findings("setup", {"args": args})}

    def release(self, msg: dict) -> dict:
        """Between records: what this worker holds on the device for them goes back (a pool sized for a
        large record's burst would stay held while its lane waits for the next one)."""
        self.timed_sets, self.burst_buffers = None, None
        self.drop_reply_arena()
        if self.pool is not None:
            self.pool.close()
        release_device_memory()
        return {"ok": True}

    def handle(self, msg: dict) -> dict:
        """A ``call``, ``profile`` or ``time`` request: its plan, every call made by :func:`drive` from here."""
        op = msg.get("op")
        if op != "burst":
            self.timed_sets = None
        plans = {"call": self.call, "profile": self.profiled, "time": self.time, "burst": self.burst}
        return drive(plans[op](msg), self.run)

    def call(self, msg: dict) -> Any:
        """The plan of a ``call`` request: one call on fresh device copies of the inputs (viewed in the
        non-contiguous layouts the request gives, for an edge round: :func:`solbench.data.domain.apply_layout`)."""
        args = self._to_device(msg["inputs"])
        if msg.get("layouts"):
            args = self._laid_out(args, msg["layouts"])
        shapes, pristine = self._shapes(args), self._pristine(args)
        self._sync()
        result = yield args
        self._sync()
        outputs = self._describe(result, msg["expect"], args)
        return {"ok": True, "outputs": outputs, "inputs_after": self._after(args, shapes, pristine),
                "findings": self._findings("call", {"args": args, "result": result})}

    def profiled(self, msg: dict) -> Any:
        """The plan of a ``profile`` request: a ``call`` whose call alone the profiler collects.

        The inputs are copied to the device and the copies to compare with are taken first; then
        cudaProfilerStart, an NVTX range ``solbench.profile``, the call, a synchronize, the range's end
        and cudaProfilerStop (Nsight Compute runs with ``--profile-from-start off``). On the CPU there
        is no profiler: the call is made as ``call`` makes it.
        """
        args = self._to_device(msg["inputs"])
        shapes, pristine = self._shapes(args), self._pristine(args)
        self._sync()
        profiler = _CudaProfiler() if self.device.startswith("cuda") else None
        if profiler is not None:
            profiler.start()
        try:
            result = yield args
            self._sync()
        finally:
            if profiler is not None:
                profiler.stop()
        outputs = self._describe(result, msg["expect"], args)
        return {"ok": True, "outputs": outputs, "inputs_after": self._after(args, shapes, pristine),
                "findings": self._findings("call", {"args": args, "result": result})}

    def _verify(self, sets: list[list[Any]], pristine: list[list[Any]] | None, spec: dict | None) -> Any:
        """The parent's checks of the timed calls over these sets (solbench.timing.Verify); the
        copies taken before timing receive the same writes."""
        spec = spec or {}
        edits = [self.timing.Edit(e["sample"], e["set"], e["input"], e["index"], e["values"]) for e in spec.get("edits", [])]
        refresh = spec.get("refresh")
        fresh = (refresh["set"], self._to_device(refresh["inputs"])) if refresh else None
        return self.timing.Verify(sets, edits, spec.get("keep", []), fresh, mirror=pristine)

    def _config(self, msg: dict) -> Any:
        known = {f.name for f in fields(self.timing.TimingConfig)}
        return self.timing.TimingConfig(**{k: v for k, v in msg["config"].items() if k in known})

    def prime(self, msg: dict) -> dict:
        """The timer's one-time costs (CUPTI's start, its delimiter kernels), before the first timing window."""
        self.timing.prime_trace(self._config(msg))
        return {"ok": True}

    def time(self, msg: dict) -> Any:
        """The plan of a ``time`` request: the timed calls, then the guards' probe (if any)."""
        t0 = _perf_counter()
        config = self._config(msg)
        sets = [self._to_device(s) for s in msg["sets"]]
        shapes = [self._shapes(s) for s in sets]
        pristine = [self._pristine(s) for s in sets]
        verify = self._verify(sets, None if self._on_device_route else pristine, msg.get("verify"))
        self._sync()
        t_timer = _perf_counter()
        result, last = yield from self.timing.timing_plan(sets, config, verify)
        self._sync()
        t_timer = _perf_counter() - t_timer
        expect = msg["expect"]
        last_outputs = [self._describe(last[i], expect, args) if i in last else None for i, args in enumerate(sets)]
        kept = [{"sample": s, "set": i, "outputs": self._describe(out, expect, sets[i])} for s, i, out in verify.kept]
        refresh = None
        if verify.refresh_set is not None:
            k = verify.refresh_set
            refresh = {"set": k, "outputs": self._describe(verify.refreshed, expect, sets[k])}
        sets_after = [self._after(s, sh, p) for s, sh, p in zip(sets, shapes, pristine, strict=True)]
        # On the device route the sets are views of the pool, which the next request (the burst's
        # edits, a larger reply area) overwrites or replaces: the burst gets its own copies.
        self.timed_sets = [self._own(s) for s in sets] if self._on_device_route else sets
        context: dict[str, Any] = {"sets": sets, "timing": result}
        t_probe = _perf_counter()
        if self.findings_hook is not None:  # the guards' own calls: through the same call path
            context["memo"] = yield from worker_probe(context)
        t_probe = _perf_counter() - t_probe
        t_findings = _perf_counter()
        findings = self._findings("time", context)  # after the probe, as before: its finding is among them
        t_findings = _perf_counter() - t_findings
        # Where the request's time went besides the samples (diagnostic: no figure is taken from it).
        result.details.update(worker_probe_s=t_probe, worker_findings_s=t_findings, worker_timer_s=t_timer,
                              worker_rest_s=_perf_counter() - t0 - t_timer - t_probe - t_findings,
                              worker_receive_s=self.received_s)
        return {"ok": True, "timing": result.as_dict(), "last_outputs": last_outputs, "samples": verify.sample,
                "kept": kept, "refresh": refresh, "sets_after": sets_after, "findings": findings}


    def burst_prepare(self, msg: dict) -> dict:
        """Room for the next burst's outputs (:func:`solbench.worker.burst.output_buffers`), untimed."""
        self.burst_buffers = None
        self.drop_reply_arena()
        self.burst_buffers = output_buffers(int(msg["calls"]), msg["expect"], self.device)
        self.reply_arena = reply_arena(self.burst_buffers)
        self._sync()
        return {"ok": True}

    def drop_reply_arena(self) -> None:
        if self.reply_arena is not None:
            self.reply_arena.close()
            self.reply_arena = None

    def burst(self, msg: dict) -> Any:
        """The plan of a ``burst`` request: back-to-back calls on the last timing's sets (module docstring)."""
        sets = self.timed_sets
        if sets is None:
            return {"ok": False, "kind": "protocol", "message": "a burst needs a timing before it"}
        calls = int(msg["calls"])
        staged = stage_edits(sets, msg.get("edits"), calls)
        buffers, self.burst_buffers = self.burst_buffers, None
        if buffers:  # room made ahead for the most calls any claim asks for: this burst's rows only
            buffers = [b[:calls] for b in buffers]
        self._sync()
        misfits = yield from burst_plan(sets, calls, staged, buffers, self._sync if self.device.startswith("cuda") else None)
        self._sync()
        expect = msg["expect"]
        if not buffers:
            buffers = None
        elif not self._on_device_route:
            import torch

            buffers = [torch.Tensor.to(b, "cpu") for b in buffers]
        return {"ok": True, "stacked": buffers,
                "misfits": [{"call": c, "outputs": self._describe(o, expect, sets[c % len(sets)])}
                            for c, o in misfits.items()], "findings": []}


class _CudaProfiler:
    """cudaProfilerStart/Stop and an NVTX range around one profiled call."""

    def __init__(self) -> None:
        import torch

        self.cuda = torch.cuda

    def start(self) -> None:
        self.cuda.profiler.start()
        self.cuda.nvtx.range_push("solbench.profile")

    def stop(self) -> None:
        self.cuda.nvtx.range_pop()
        self.cuda.profiler.stop()


def _failure(err: BaseException) -> dict:
    tb = traceback.format_exc()
    print(tb, file=sys.stderr, flush=True)
    if isinstance(err, SystemExit):
        message = f"run() called sys.exit({err.code!r})"
    else:
        # The first line says what went wrong (CUDA's "an illegal memory access was encountered");
        # the last often says where (a Triton compile error's position) or only gives advice.
        text = [ln.strip() for ln in str(err).strip().splitlines() if ln.strip()]
        said = text[0] if len(text) < 2 else f"{text[0]} ... {text[-1]}"
        message = f"{type(err).__name__}: {said}" if text else type(err).__name__
        where = _where(err)
        message = f"{message} (at {where})" if where else message
    return {"ok": False, "kind": "runtime", "message": message[:2000], "traceback": tb[-8000:]}


def _where(err: BaseException) -> str | None:
    """``file.py:line`` of the innermost frame of the traceback outside solbench, torch and Python's own
    libraries: where in the candidate (or a file it loaded) the error came from."""
    package = str(Path(__file__).resolve().parents[1])
    libraries = (sys.prefix, sys.base_prefix, sys.exec_prefix)
    frames = [f for f in traceback.extract_tb(err.__traceback__) if f.filename and not f.filename.startswith("<")
              and not (f.filename.startswith(package) and "_shipped" not in f.filename)  # shipped candidates count
              and not (f.filename.startswith(libraries) and not f.filename.startswith(package))]
    return f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else None


def serve(sock: socket.socket, worker: Worker, sandbox: dict[str, Any] | None = None) -> int:
    import time

    from solbench.worker.devwire import WorkerPool
    from solbench.worker.wire import SharedFileError, recv_message, send_message

    pool = worker.pool = WorkerPool()
    send_message(sock, {"op": "hello", "pid": os.getpid(), "sandbox": sandbox or {}, "at": time.monotonic()})
    handlers = {"load": worker.load, "setup": worker.call_setup, "call": worker.handle, "time": worker.handle,
                "profile": worker.handle, "burst": worker.handle, "burst_prepare": worker.burst_prepare, "prime": worker.prime,
                "release": worker.release, "ping": lambda msg: {"ok": True}}
    while True:
        pool.begin()
        _await_request(sock)
        receiving = time.monotonic()
        msg = recv_message(sock, device=pool)
        worker.received_s = time.monotonic() - receiving
        op = msg.get("op")
        if op == "exit":
            return 0
        handler = handlers.get(op)
        if handler is None:
            encoded = pool.encode({"ok": False, "kind": "protocol", "message": f"unknown op {op!r}"})
        elif pool.error is not None and op != "load":
            encoded = pool.encode({"ok": False, "kind": "runtime",
                                   "message": f"the worker could not map the shared device pool: {pool.error}"})
        else:
            try:
                # Encode before sending: a reply that cannot be encoded becomes a failure reply
                # instead of a half-sent message.
                encoded = pool.encode(handler(msg))
            except BaseException as err:  # noqa: B036 - the candidate's failure, whatever it is, is data
                encoded = pool.encode(_failure(err))
        try:
            # A burst's reply goes into the file its burst_prepare faulted in (solbench.worker.burst.reply_arena).
            pool.send(sock, encoded, arena=worker.reply_arena if op == "burst" else None)
        except SharedFileError as err:  # nothing of the reply was sent: say why instead of dying
            pool.send(sock, pool.encode({"ok": False, "kind": "runtime",
                                         "message": f"the worker could not send its reply by memfd: {err.strerror}"}))
        if op == "burst":  # its output rows (up to 4 GiB) go back to the device, not to this cache
            del encoded
            worker.burst_buffers = None
            worker.drop_reply_arena()
            release_device_memory()


def _await_request(sock: socket.socket) -> None:
    """Block until the next request's first byte is here (peeked, not read: its file descriptors stay with it),
    so that its receipt can be timed apart from the wait for it."""
    try:
        sock.recv(1, socket.MSG_PEEK)
    except OSError:
        pass  # recv_message says what is wrong


def release_device_memory() -> None:
    """Give back the device memory this process's allocator keeps cached (a no-op without CUDA): a
    process that holds GiBs it no longer uses leaves the records in flight beside it short of memory."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def _channel(fd: int | None, path: str | None) -> socket.socket:
    """The channel to the parent: the inherited socket ``fd``, or a connection to ``path``."""
    if fd is not None:
        return socket.socket(fileno=fd)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    return sock


def parse_arguments(prog: str, argv: list[str] | None = None) -> argparse.Namespace:
    """The command line a sandboxed process gets from :class:`solbench.worker.client.WorkerClient`."""
    parser = argparse.ArgumentParser(prog=prog)
    channel = parser.add_mutually_exclusive_group(required=True)
    channel.add_argument("--fd", type=int, help="connected socket to the parent")
    channel.add_argument("--connect", help="path of the parent's listening socket (a worker under a launcher)")
    parser.add_argument("--parent", type=int, default=None, help="the parent's pid (the worker dies with it)")
    parser.add_argument("--no-guards", dest="guards", action="store_false",
                        help="no guard set up, no finding reported (the engine-only comparison)")
    parser.add_argument("--user", default=None, help="uid:gid to run as (the parent runs as root)")
    parser.add_argument("--read", action="append", default=[], help="a folder the worker may read (repeatable)")
    parser.add_argument("--profiler", action="store_true",
                        help="runs under Nsight Compute (solbench profile): local TCP left open to its front end")
    return parser.parse_args(argv)


def enter_sandbox(args: argparse.Namespace) -> tuple[socket.socket, dict[str, Any]]:
    """Everything a sandboxed process does before it runs untrusted code: the channel to the parent,
    the resource limits, the unprivileged user, the guards' limits (unless ``--no-guards``) and the
    watch on the parent. Returns (channel, what was applied). Also the problem host's start
    (:mod:`solbench.engine.problem_host`)."""
    # First, while the worker is still the user that started it: the socket file is that user's.
    sock = _channel(args.fd, args.connect)
    _limit_resources()
    sandbox = _become_worker(args.user, args.read)
    # Trusted modules first: timing binds its timer functions at import.
    importlib.import_module("solbench.timing")
    if args.guards:
        # Baselines and process limits before untrusted code is imported; the worker's folder is
        # the current one.
        sandbox.update(setup_worker(os.getcwd(), readable=args.read, block_tcp=not args.profiler))
    _REAP.append(_die_with_parent(args.parent if args.parent is not None else os.getppid()))
    sock.set_inheritable(False)  # processes the untrusted code starts do not get the channel
    return sock, sandbox


_REAP: list[Callable[[], None]] = []  # kills what the untrusted code started (set by enter_sandbox)


def exit_now(code: int) -> None:
    """Kill what the untrusted code started (also when the parent is gone: nothing else would), flush
    and leave without interpreter teardown (seconds with torch loaded, and atexit hooks of untrusted
    code): the parent kills the process group after this anyway."""
    for reap in _REAP:
        reap()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> None:
    args = parse_arguments("python -m solbench.worker", argv)
    sock, sandbox = enter_sandbox(args)
    timing = importlib.import_module("solbench.timing")  # imported (and bound) by enter_sandbox
    code = serve(sock, Worker(timing, worker_findings if args.guards else None), sandbox)
    sock.close()
    exit_now(code)


if __name__ == "__main__":
    main()
