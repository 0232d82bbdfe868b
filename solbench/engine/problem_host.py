"""The problem host: a sandboxed process that runs a problem's own code for the parent.

A problem folder is trusted less than the harness: its reference, input generator and cost hook (and
all they import) run here, never in the parent nor in a candidate's worker. The host starts as a
worker does (:class:`solbench.worker.client.WorkerClient` with this module as its entry, then
:func:`solbench.worker.main.enter_sandbox`): as the worker user when the parent is root, in a session
and cgroup of its own, under Landlock (reads below the Python installation, the system's libraries
and the folders of the problems it serves with their model's folder, whose other problems a layer
problem's reference may reuse; writes below its own folder) and the seccomp filter,
watching the parent. Every request has a deadline (``RunOptions.problem_timeout_s``); what the host
sends back is data (JSON and raw tensors, :mod:`solbench.worker.wire`: nothing is unpickled), bounded
by the sizes the problem declares and checked again here. Whatever the problem's code does (raise,
``sys.exit``, hang, crash, return garbage, start processes) the caller gets one :class:`ProblemError`
line naming the problem file and the code; a host that timed out, died or sent garbage is stopped
with everything it started, and the next request starts a fresh one.

One host serves a whole command (``list``: every problem whose work its code computes; ``run``: every
workload of every problem), started on first use; it may read the folders of the problems it was
started for, and is started again (with the new folder added) for a problem outside them.

Requests (every one carries ``"problem": {"data": the problem as JSON, "path": its problem.yaml}``):

``{"op": "case", "axes", "seed", "device", "scalars"}`` -> ``{"inputs": [value...], "outputs": [...]}`` (a
run's case in one request: the inputs of ``seed`` made there, the reference on copies of them)
``{"op": "reference", "axes", "args": [value...], "device"}`` -> ``{"outputs": [tensor | description]}``
``{"op": "cases", "axes", "seeds": [int...], "device", "scalars"}`` -> ``{"cases": [{"inputs", "outputs"}...]}`` and
``{"op": "references", "axes", "calls": [[value...]...], "device"}`` -> ``{"outputs": [[tensor | description]...]}``:
several at once, in order (a request's round trip, its device pool and the host's cache release are paid once)
``{"op": "generate", "axes", "seed", "device"}`` -> ``{"values": {name: tensor | scalar | description}}``
``{"op": "cost", "axes", "scalars"}`` -> ``{"flops", "bytes"}`` (seed-0 inputs, placeholders: ``list``, ``sol``)
``{"op": "costs", "axes", "sets": [{name: value}...]}`` -> ``{"costs": [[flops, bytes]...]}``
``{"op": "flops", "axes", "device"}`` -> ``{"flops"}`` (FlopCounterMode over the reference)
``{"op": "deep_check"}`` -> ``{"lines": [str...]}`` (``validate --deep``)

A failure replies ``{"ok": false, "kind": "raised" | "problem", "message": str}``. A tensor that does
not match its declaration travels as ``{"kind": "mismatch", "type", "shape", "dtype"}``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from solbench.data import Cost, Problem, cost_from_result
from solbench.errors import ProblemError, SolbenchError
from solbench.settings import PROBLEM_TIMEOUT_S, WORKER_START_TIMEOUT_S

ENTRY = "solbench.engine.problem_host"
_SLACK = 1 << 16  # reply bytes beyond the declared tensors (scalars, descriptions)
_MESSAGE_CHARS = 300  # of a message the problem's code wrote (an exception's text)


# --- the parent's side ---------------------------------------------------------------------------

@dataclass
class ProblemHost:
    """The problem host of one command: started on first use, reused for every request, stopped by
    :meth:`close` (or at exit). ``account``: (uid, gid) to run as when this process is root."""

    folders: set[str] = field(default_factory=set)
    device: str = "cpu"
    account: tuple[int, int] | None = None
    guards: bool = True
    timeout_s: float = PROBLEM_TIMEOUT_S
    # How tensors travel to and from the host: "device" (a CUDA pool shared with it alone, as with the
    # workers: solbench.worker.devwire) or "memfd" (through host memory). On the H200 the memfd copies of
    # every case and reference were most of a run's busy time in the parent (2026-12-02, call 8).
    transport: str = "memfd"
    client: Any = None
    starts: int = 0  # processes started (a failure stops one; the next request starts another)
    _cache: dict[tuple, Any] = field(default_factory=dict)
    # One request at a time: a run's lanes share a workload's references (solbench.engine.pipeline).
    _lock: threading.RLock = field(default_factory=threading.RLock)
    # What a caller's device-gate hold does while it waits for this host (the run's gate steps out:
    # a timing window is not held back by a lane waiting for a host busy with another lane).
    step_out: Callable[[], AbstractContextManager[None]] = nullcontext
    # What a caller's hold does while it only awaits this host's reply (given the host's pid): the run's gate
    # may lock the host through the driver for a timing window instead of waiting for the request to end.
    awaiting: Callable[[int], AbstractContextManager[None]] = lambda pid: nullcontext()

    # lifecycle
    def expect(self, folders: Any) -> ProblemHost:
        """Declare the problem folders this host will serve before it starts, so that one process serves
        them all (it is started again, with the new folder, for a problem outside them)."""
        if self.client is None:
            self.folders.update(str(Path(f).resolve()) for f in folders)
        return self

    def start(self, problem: Problem) -> None:
        """Start the process for ``problem`` now (a no-op when it runs): its imports and sandbox, seconds
        of CPU work, then happen before the caller holds the device gate for the host's device work."""
        with self._serving():
            self._client(problem)

    @contextmanager
    def _serving(self) -> Iterator[None]:
        """This host to the caller alone; waiting for it, the caller steps out of the device gate."""
        if not self._lock.acquire(blocking=False):
            with self.step_out():
                self._lock.acquire()
        try:
            yield
        finally:
            self._lock.release()

    def _covers(self, problem: Problem) -> bool:
        return str(problem.folder.resolve()) in self.folders

    def _client(self, problem: Problem) -> Any:
        from solbench.worker import WorkerClient, WorkerStartError

        if self.client is not None and not self._covers(problem):
            self.close()  # started for other folders: a fresh host may read this one too
        self.folders.add(str(problem.folder.resolve()))
        if self.client is None:
            client = WorkerClient(self.device, guards=self.guards, account=self.account,
                                  reads=host_reads(self.folders), entry=ENTRY, transport=self.transport,
                                  shrink_pool=True)
            client.spawn()
            self.starts += 1
            try:
                client.wait_ready(WORKER_START_TIMEOUT_S)
            except WorkerStartError as err:
                client.discard()
                raise SolbenchError(f"the problem host (which runs problems' own code) did not start: {err}") from None
            self.client = client
        return self.client

    def close(self) -> None:
        """Stop the host and everything it started (new sessions too); remove its folder."""
        if self.client is not None:
            self.client.discard()
            self.client = None

    def __enter__(self) -> ProblemHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # requests
    def request(self, problem: Problem, what: str, header: dict[str, Any], reply_bytes: int = 0) -> dict[str, Any]:
        """One request about ``problem``; ``what`` names the code it runs (for the error line)."""
        from solbench.worker import WorkerFailure, clean_log

        label = problem.path or problem.name
        message = {**header, "problem": _problem_message(problem), "reply_room": reply_bytes + _SLACK}
        with self._serving():
            client = self._client(problem)  # started already by the runner (start()), outside the gate
            proc = getattr(client, "proc", None)
            awaiting = (lambda: self.awaiting(proc.pid)) if proc is not None else None
            try:
                reply = client.request(message, self.timeout_s, reply_bytes + _SLACK, awaiting)
                if reply.get("kind") == "transport":  # the host could not map the device pool: the client
                    reply = client.request(message, self.timeout_s, reply_bytes + _SLACK, awaiting)  # now by memfd
            except WorkerFailure as err:
                self.close()
                raise ProblemError([f"{label}: {what} {_failure_text(err, self.timeout_s)}"]) from None
        if reply.get("ok") is True:
            return reply
        message = clean_log(str(reply.get("message") or "failed")).replace("\n", " ")[:_MESSAGE_CHARS]
        if reply.get("kind") == "problem":
            raise ProblemError([f"{label}: {message}"])
        raise ProblemError([f"{label}: {what} {message}"])

    def reference(self, problem: Problem, axes: dict[str, int], args: list[Any], device: str) -> list[Any]:
        """The reference's outputs on these inputs, on ``device``."""
        what = f"reference {problem.reference}"
        reply = self.request(problem, what, {"op": "reference", "axes": axes, "args": list(args), "device": device},
                             problem.declared_bytes(problem.outputs, axes))
        outputs = reply.get("outputs")
        if not isinstance(outputs, list):
            raise ProblemError([f"{problem.path or problem.name}: {what}: the problem host sent no outputs"])
        return self._outputs(problem, what, outputs, axes, device)

    def references(self, problem: Problem, axes: dict[str, int], calls: list[list[Any]], device: str) -> list[list[Any]]:
        """The reference's outputs on each of several calls' inputs, in one request, on ``device``."""
        what = f"reference {problem.reference}"
        reply = self.request(problem, what, {"op": "references", "axes": axes, "calls": [list(a) for a in calls],
                                             "device": device},
                             len(calls) * problem.declared_bytes(problem.outputs, axes))
        outputs = reply.get("outputs")
        if not isinstance(outputs, list) or len(outputs) != len(calls) or not all(isinstance(o, list) for o in outputs):
            raise ProblemError([f"{problem.path or problem.name}: {what}: the problem host sent no outputs"])
        return [self._outputs(problem, what, o, axes, device) for o in outputs]

    def cases(self, problem: Problem, axes: dict[str, int], seeds: list[int], device: str,
              scalars: dict[str, Any]) -> list[tuple[dict[str, Any], list[Any]]]:
        """Several cases (:meth:`case`) in one request, in the order of ``seeds``."""
        what = f"reference {problem.reference}" + (f" or input generator {problem.input_generator}"
                                                   if problem.input_generator else "")
        reply = self.request(problem, what, {"op": "cases", "axes": axes, "seeds": list(seeds), "device": device,
                                             "scalars": scalars},
                             len(seeds) * (problem.declared_bytes(problem.inputs, axes)
                                           + problem.declared_bytes(problem.outputs, axes)))
        made = reply.get("cases")
        if not isinstance(made, list) or len(made) != len(seeds) or not all(isinstance(c, dict) for c in made):
            raise ProblemError([f"{problem.path or problem.name}: {what}: the problem host sent no cases"])
        return [self._case_reply(problem, what, c, axes, device) for c in made]

    def case(self, problem: Problem, axes: dict[str, int], seed: int, device: str,
             scalars: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
        """A case made in the host in one request: the inputs of ``seed`` (as
        :func:`solbench.data.inputs.make_inputs` makes them here) and the reference's outputs on
        copies of them; both checked against the declaration, on ``device``."""
        what = f"reference {problem.reference}" + (f" or input generator {problem.input_generator}"
                                                   if problem.input_generator else "")
        reply = self.request(problem, what, {"op": "case", "axes": axes, "seed": seed, "device": device,
                                             "scalars": scalars},
                             problem.declared_bytes(problem.inputs, axes) + problem.declared_bytes(problem.outputs, axes))
        return self._case_reply(problem, what, reply, axes, device)

    def _case_reply(self, problem: Problem, what: str, reply: dict[str, Any], axes: dict[str, int],
                    device: str) -> tuple[dict[str, Any], list[Any]]:
        values, outputs = reply.get("inputs"), reply.get("outputs")
        if not isinstance(values, list) or len(values) != len(problem.inputs) or not isinstance(outputs, list):
            raise ProblemError([f"{problem.path or problem.name}: {what}: the problem host sent no case"])
        inputs = {name: _input(problem, name, v, axes, device) for name, v in zip(problem.inputs, values, strict=True)}
        return inputs, self._outputs(problem, what, outputs, axes, device)

    def _outputs(self, problem: Problem, what: str, outputs: list[Any], axes: dict[str, int], device: str) -> list[Any]:
        import torch

        for name, out in zip(problem.outputs, outputs, strict=False):
            if not isinstance(out, torch.Tensor):
                raise ProblemError([f"{problem.path or problem.name}: {what}: output {name} is {_described(out)}, "
                                    f"declared {problem.shape(name, axes)} {problem.outputs[name].dtype}"])
        return [o.to(device) for o in outputs]

    def generate(self, problem: Problem, axes: dict[str, int], seed: int, device: str) -> dict[str, Any]:
        """What the input generator returns for a generator seeded with ``seed``, on ``device``."""
        import torch

        what = f"input generator {problem.input_generator}"
        reply = self.request(problem, what, {"op": "generate", "axes": axes, "seed": seed, "device": device},
                             problem.declared_bytes(problem.inputs, axes))
        values = reply.get("values")
        if not isinstance(values, dict):
            raise ProblemError([f"{problem.path or problem.name}: {what} must return a dict of inputs"])
        out = {}
        for name, v in values.items():
            if isinstance(v, dict):
                shape = problem.shape(name, axes) if name in problem.inputs else None
                raise ProblemError([f"{problem.path or problem.name}: {what} gave {name} as {_described(v)}, "
                                    f"declared {shape} {problem.inputs[name].dtype if name in problem.inputs else ''}"
                                    .rstrip()])
            out[name] = v.to(device) if isinstance(v, torch.Tensor) else v
        return out

    def workload_cost(self, problem: Problem, axes: dict[str, int], scalars: dict[str, Any]) -> Cost:
        """The cost hook on the seed-0 inputs of these axes (cached: it is deterministic)."""
        key = ("cost", _problem_key(problem), tuple(sorted(axes.items())), tuple(sorted(scalars.items())))
        if key not in self._cache:
            reply = self.request(problem, f"cost hook {problem.cost}",
                                 {"op": "cost", "axes": axes, "scalars": scalars})
            self._cache[key] = cost_from_result(problem, {k: reply.get(k) for k in ("flops", "bytes")})
        return self._cache[key]

    def costs(self, problem: Problem, axes: dict[str, int], sets: list[dict[str, Any]]) -> list[Cost]:
        """The cost hook on each of these input sets."""
        reply = self.request(problem, f"cost hook {problem.cost}", {"op": "costs", "axes": axes, "sets": sets})
        costs = reply.get("costs")
        if not isinstance(costs, list) or len(costs) != len(sets) or not all(
                isinstance(c, list) and len(c) == 2 for c in costs):
            raise ProblemError([f"{problem.path or problem.name}: cost hook {problem.cost}: the problem host sent "
                                f"{len(costs) if isinstance(costs, list) else 'no'} costs for {len(sets)} input sets"])
        return [cost_from_result(problem, {"flops": f, "bytes": b}) for f, b in costs]

    def count_flops(self, problem: Problem, axes: dict[str, int], device: str = "meta") -> int:
        """FlopCounterMode's count of the reference at these axes (cached on meta tensors)."""
        key = ("flops", _problem_key(problem), tuple(sorted(axes.items())), device)
        if key not in self._cache:
            reply = self.request(problem, f"flops: auto (reference {problem.reference} under FlopCounterMode)",
                                 {"op": "flops", "axes": axes, "device": device})
            self._cache[key] = _count(problem, "flops: auto", reply.get("flops"))
        return self._cache[key]

    def deep_check(self, problem: Problem) -> list[str]:
        """``validate --deep``'s lines for this problem (its code runs in the host)."""
        what = (f"cost hook {problem.cost} (or the reference and generator it is checked with)" if problem.cost
                else f"reference {problem.reference} under FlopCounterMode")
        reply = self.request(problem, what, {"op": "deep_check"})
        lines = reply.get("lines")
        if not isinstance(lines, list):
            raise ProblemError([f"{problem.path or problem.name}: validate --deep: the problem host sent no lines"])
        from solbench.worker import clean_log

        return [clean_log(str(line)).replace("\n", " ")[:2000] for line in lines]

    def functions(self, problem: Problem) -> tuple[HostedReference, HostedGenerator | None]:
        """The reference and input generator as callables that run here, in the host."""
        gen = HostedGenerator(self, problem) if problem.input_generator else None
        return HostedReference(self, problem), gen


@dataclass(frozen=True)
class HostedReference:
    """A problem's reference, run in its host: :meth:`outputs` (``solbench.engine.cases`` calls it)."""

    host: ProblemHost
    problem: Problem

    def outputs(self, axes: dict[str, int], args: list[Any], device: str) -> list[Any]:
        return self.host.reference(self.problem, axes, args, device)

    def case(self, axes: dict[str, int], seed: int, device: str,
             scalars: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
        return self.host.case(self.problem, axes, seed, device, scalars)

    def outputs_many(self, axes: dict[str, int], calls: list[list[Any]], device: str) -> list[list[Any]]:
        return self.host.references(self.problem, axes, calls, device)

    def cases(self, axes: dict[str, int], seeds: list[int], device: str,
              scalars: dict[str, Any]) -> list[tuple[dict[str, Any], list[Any]]]:
        return self.host.cases(self.problem, axes, seeds, device, scalars)


@dataclass(frozen=True)
class HostedGenerator:
    """A problem's input generator, run in its host; called as the generator itself is,
    ``(axes, generator, device)``: the host seeds its own generator with ``generator``'s seed."""

    host: ProblemHost
    problem: Problem

    def __call__(self, axes: dict[str, int], generator: Any, device: str) -> dict[str, Any]:
        return self.host.generate(self.problem, dict(axes), int(generator.initial_seed()), str(device))


def _input(problem: Problem, name: str, value: Any, axes: dict[str, int], device: str) -> Any:
    """An input the host made, as declared: a plain tensor of its shape and dtype, or a scalar of its dtype."""
    import torch

    from solbench.data import scalar_value

    spec, shape = problem.inputs[name], problem.shape(name, axes)
    if shape is None:
        try:
            return scalar_value(value, spec.dtype)
        except ValueError as err:
            raise ProblemError([f"{problem.path or problem.name}: input {name} from the problem host: {err}"]) from None
    if not (isinstance(value, torch.Tensor) and tuple(value.shape) == shape
            and str(value.dtype).removeprefix("torch.") == spec.dtype):
        raise ProblemError([f"{problem.path or problem.name}: input {name} from the problem host is {_described(value)}, "
                            f"declared {shape} {spec.dtype}"])
    return value.to(device)


def _count(problem: Problem, what: str, value: Any) -> int:
    from solbench.data import whole_number

    try:
        return whole_number(value)
    except ValueError as err:
        raise ProblemError([f"{problem.path or problem.name}: {what}: {err}"]) from None


def _failure_text(err: Any, timeout_s: float) -> str:
    if err.kind == "timeout":
        return f"did not finish within {timeout_s:g} s; the problem host was stopped with all it started"
    if err.kind == "died":
        return f"ended the problem host ({err.message.removeprefix('the worker ')})"
    return f"made the problem host send an invalid reply ({err.message})"


def _described(value: Any) -> str:
    if isinstance(value, dict) and value.get("kind") == "mismatch":
        return f"{tuple(value.get('shape') or ())} {value.get('dtype')}"
    if isinstance(value, dict):
        return str(value.get("type") or "not a tensor")[:60]
    return type(value).__name__


def _problem_message(problem: Problem) -> dict[str, Any]:
    """The problem as the host rebuilds it: its fields and the problem.yaml its files are next to. Made once
    per problem object (a run sends it with every case, reference and check: the dump took the parent's GIL each
    time); a problem is not changed once loaded."""
    made = _MESSAGES.get(id(problem))
    if made is None or made[0] is not problem:
        if len(_MESSAGES) >= _MESSAGES_KEPT:
            _MESSAGES.clear()
        path = problem.path or problem.folder / "problem.yaml"
        made = _MESSAGES[id(problem)] = (problem, {"data": problem.model_dump(mode="json", exclude_unset=True),
                                                   "path": str(path)})
    return made[1]


_MESSAGES: dict[int, tuple[Problem, dict[str, Any]]] = {}  # _problem_message's, by the problem object's id
_MESSAGES_KEPT = 1024


def _problem_key(problem: Problem) -> str:
    return json.dumps(_problem_message(problem), sort_keys=True)


_DEFAULT: ProblemHost | None = None


def default_host() -> ProblemHost:
    """The process's shared host, for calls without one (the Python API's ``workload_point``): started
    on first use, stopped at exit. As the run's default worker user when this process is root."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = new_host()
    return _DEFAULT


class HostPool:
    """A run's problem hosts, shared by its lanes: at most ``size`` processes, each lent to one lane
    at a time (a host serves one request at a time anyway), started on first use and kept for the
    run. Every host may read every problem folder of the run (``folders``), as one host per lane did:
    the same isolation, fewer processes importing torch (and holding a device context) at once."""

    def __init__(self, make: Callable[[], ProblemHost], size: int):
        self._make, self.size = make, max(1, size)
        self._all: list[ProblemHost] = []
        self._idle: list[ProblemHost] = []
        self._gone = 0  # processes started by the hosts stopped by close()
        self._cond = threading.Condition()

    @contextmanager
    def lend(self, folders: Any) -> Iterator[ProblemHost]:
        """A host for this lane's requests (one that is idle, else a new one while under ``size``,
        else the next one given back)."""
        with self._cond:
            while not self._idle and len(self._all) >= self.size:
                self._cond.wait()
            host = self._idle.pop() if self._idle else self._make()
            if host not in self._all:
                self._all.append(host)
        try:
            yield host.expect(folders)
        finally:
            with self._cond:
                kept = host in self._all  # not closed while lent
                if kept:
                    self._idle.append(host)
                self._cond.notify()
            if not kept:
                host.close()

    @property
    def starts(self) -> int:
        """Processes the pool's hosts started so far (those stopped included)."""
        with self._cond:
            return self._gone + sum(h.starts for h in self._all)

    def pids(self) -> set[int]:
        """The processes of the pool's hosts running now."""
        with self._cond:
            return {h.client.proc.pid for h in self._all
                    if h.client is not None and getattr(h.client, "proc", None) is not None}

    def close_idle(self) -> None:
        """Stop the hosts no lane holds now (their device memory back; a later request starts one again)."""
        with self._cond:
            idle, self._idle = self._idle, []
            self._all = [h for h in self._all if h not in idle]
            self._gone += sum(h.starts for h in idle)
            self._cond.notify_all()
        for host in idle:
            host.close()

    def close(self) -> None:
        """Stop every host (a later request starts one again; a host lent now is stopped when given back)."""
        with self._cond:
            hosts, self._all, self._idle = self._all, [], []
            self._gone += sum(h.starts for h in hosts)
            self._cond.notify_all()
        for host in hosts:
            host.close()


def host_reads(folders: set[str]) -> tuple[str, ...]:
    """What a host may read of the problems: their folders and each one's model folder (its parent), whose
    sibling problems a layer problem's reference chains (llama3_1_8b.decoder_layer loads its ops' references:
    run on its own, its host was denied them)."""
    return tuple(sorted(set(folders) | {str(Path(f).parent) for f in folders}))


def new_host(device: str = "cpu", user: str | None = None, guards: bool = True,
             timeout_s: float | None = None, transport: str = "memfd") -> ProblemHost:
    """A host (not started yet) with the run settings' defaults for the user and the timeout;
    ``transport`` as the run's workers resolved it (:func:`solbench.engine.options.resolve_transport`)."""
    from solbench.engine.options import default_problem_timeout, default_worker_user
    from solbench.guards import resolve_account

    return ProblemHost(device=device, account=resolve_account(user or default_worker_user()), guards=guards,
                       timeout_s=timeout_s if timeout_s is not None else default_problem_timeout(),
                       transport=transport)


# --- the host's side -----------------------------------------------------------------------------

_PROBLEMS: dict[str, Problem] = {}
_FUNCTIONS: dict[tuple[str, str], Any] = {}


def _problem(msg: Any) -> tuple[str, Problem]:
    from solbench.data import problem_from_dict

    key = json.dumps(msg, sort_keys=True)
    if key not in _PROBLEMS:
        _PROBLEMS[key] = problem_from_dict(msg["data"], Path(msg["path"]))
    return key, _PROBLEMS[key]


def _function(key: str, problem: Problem, kind: str) -> Callable[..., Any]:
    """The problem's reference, generator or cost hook, imported once per host."""
    from solbench.engine import problem_code

    if (key, kind) not in _FUNCTIONS:
        load = {"reference": problem_code.load_reference, "generator": problem_code.load_generator,
                "cost": problem_code.load_cost}[kind]
        _FUNCTIONS[(key, kind)] = load(problem)
    return _FUNCTIONS[(key, kind)]


def _plain(value: Any, shape: tuple[int, ...] | None, dtype: str | None) -> Any:
    """A value to send: a plain tensor matching its declaration, a scalar, or a description."""
    import torch

    T = torch.Tensor  # through the class: the problem's code may hand back a subclass or shadow methods
    if isinstance(value, (bool, int, float)) and shape is None:
        return value
    if type(value) is torch.Tensor and dtype is not None and tuple(value.shape) == shape \
            and str(value.dtype).removeprefix("torch.") == dtype:
        return T.detach(value)
    if isinstance(value, torch.Tensor):
        return {"kind": "mismatch", "type": type(value).__name__, "shape": [int(s) for s in T.size(value)],
                "dtype": str(T.dtype.__get__(value)).removeprefix("torch.")}
    return {"kind": "other", "type": type(value).__name__}


def _reference(key: str, problem: Problem, msg: dict[str, Any]) -> dict[str, Any]:
    import torch

    axes, device = msg["axes"], msg["device"]
    args = [a.to(device) if isinstance(a, torch.Tensor) else a for a in msg["args"]]
    result = _function(key, problem, "reference")(*args)
    items = [result] if isinstance(result, torch.Tensor) else list(result) if isinstance(result, (tuple, list)) else [result]
    if len(items) != len(problem.outputs):
        raise ProblemError([f"{problem.name}: the reference must return {len(problem.outputs)} tensor(s) "
                            f"({', '.join(problem.outputs)}), returned {len(items)}"])
    return {"outputs": [_plain(v, problem.shape(n, axes), problem.outputs[n].dtype)
                        for n, v in zip(problem.outputs, items, strict=True)]}


def _case(key: str, problem: Problem, msg: dict[str, Any]) -> dict[str, Any]:
    from solbench.engine.problem_code import make_inputs

    gen = _function(key, problem, "generator") if problem.input_generator else None
    inputs = make_inputs(problem, msg["axes"], int(msg["seed"]), device=msg["device"],
                         scalars=msg.get("scalars") or {}, generator_fn=gen)
    outputs = _reference(key, problem, {**msg, "args": [v.clone() if hasattr(v, "clone") else v
                                                        for v in inputs.values()]})["outputs"]
    return {"inputs": list(inputs.values()), "outputs": outputs}


def _cases(key: str, problem: Problem, msg: dict[str, Any]) -> dict[str, Any]:
    return {"cases": [_case(key, problem, {**msg, "seed": seed}) for seed in _listed(msg, "seeds")]}


def _references(key: str, problem: Problem, msg: dict[str, Any]) -> dict[str, Any]:
    return {"outputs": [_reference(key, problem, {**msg, "args": args})["outputs"] for args in _listed(msg, "calls")]}


def _listed(msg: dict[str, Any], name: str) -> list[Any]:
    items = msg.get(name)
    if not isinstance(items, list):
        raise ProblemError([f"the request's {name} must be a list"])
    return items


def _generate(key: str, problem: Problem, msg: dict[str, Any]) -> dict[str, Any]:
    import torch

    axes, device = msg["axes"], msg["device"]
    g = torch.Generator(device=device)
    g.manual_seed(int(msg["seed"]))
    values = _function(key, problem, "generator")(dict(axes), g, device) or {}
    if not isinstance(values, dict):
        raise ProblemError([f"{problem.name}: input generator {problem.input_generator} must return a dict, "
                            f"returned {type(values).__name__}"])
    out: dict[str, Any] = {}
    for name, v in values.items():
        spec = problem.inputs.get(str(name))
        if spec is None:
            out[str(name)] = None  # an unknown name: the parent reports it (solbench.data.inputs)
        elif spec.shape is None:
            out[str(name)] = _scalar(problem, str(name), v, spec.dtype)
        else:
            out[str(name)] = _plain(v, problem.shape(str(name), axes), spec.dtype)
    return {"values": out}


def _scalar(problem: Problem, name: str, value: Any, dtype: str) -> Any:
    from solbench.data import scalar_value

    try:
        return scalar_value(value, dtype)
    except ValueError as err:
        raise ProblemError([f"{problem.name}: input generator gave scalar input {name}: {err}"]) from None


def _cost(key: str, problem: Problem, msg: dict[str, Any]) -> dict[str, Any]:
    from solbench.engine.problem_code import workload_cost

    c = workload_cost(problem, msg["axes"], msg.get("scalars") or {})
    return {"flops": c.flops, "bytes": c.bytes}


def _costs(key: str, problem: Problem, msg: dict[str, Any]) -> dict[str, Any]:
    from solbench.engine.problem_code import call_cost

    fn = _function(key, problem, "cost")
    return {"costs": [[c.flops, c.bytes] for c in (call_cost(problem, fn, msg["axes"], s) for s in msg["sets"])]}


def _flops(key: str, problem: Problem, msg: dict[str, Any]) -> dict[str, Any]:
    from solbench.engine.problem_code import count_reference_flops

    return {"flops": count_reference_flops(problem, msg["axes"], device=msg.get("device") or "meta")}


def _deep_check(key: str, problem: Problem, msg: dict[str, Any]) -> dict[str, Any]:
    from solbench.engine.problem_code import deep_check

    return {"lines": deep_check(problem)}


_HANDLERS: dict[str, Callable[[str, Problem, dict[str, Any]], dict[str, Any]]] = {
    "case": _case, "reference": _reference, "cases": _cases, "references": _references, "generate": _generate,
    "cost": _cost, "costs": _costs, "flops": _flops, "deep_check": _deep_check,
}


def _failure(err: BaseException) -> dict[str, Any]:
    print(traceback.format_exc(), file=sys.stderr, flush=True)  # the host's log, for whoever debugs the problem
    if isinstance(err, ProblemError):
        return {"ok": False, "kind": "problem", "message": "; ".join(err.errors)[:2000]}
    if isinstance(err, SystemExit):
        return {"ok": False, "kind": "raised", "message": f"called sys.exit({err.code!r})"}
    text = [ln.strip() for ln in str(err).strip().splitlines() if ln.strip()]
    return {"ok": False, "kind": "raised",
            "message": f"raised {type(err).__name__}" + (f": {text[0][:_MESSAGE_CHARS]}" if text else "")}


def _handle(msg: dict[str, Any]) -> dict[str, Any]:
    handler = _HANDLERS.get(str(msg.get("op")))
    if handler is None:
        return {"ok": False, "kind": "problem", "message": f"unknown request {str(msg.get('op'))[:40]!r}"}
    key, problem = _problem(msg["problem"])
    return {"ok": True, **handler(key, problem, msg)}


def serve(sock: Any, sandbox: dict[str, Any]) -> int:
    """Answer the parent's requests until it says exit."""
    from solbench.worker import SendArena, WorkerPool, recv_message, release_device_memory, send_message

    send_message(sock, {"op": "hello", "pid": os.getpid(), "sandbox": sandbox, "at": time.monotonic()})
    arena = SendArena()  # the replies' reused file (the parent copies a reply out before its next request)
    pool = WorkerPool()  # the device route's: requests' tensors as views of the parent's pool, replies into it
    while True:
        pool.begin()
        msg = recv_message(sock, device=pool)
        if msg.get("op") == "exit":
            return 0
        if pool.error is not None:  # the parent sends this request again by memfd, and every later one
            encoded = pool.encode({"ok": False, "kind": "transport", "transport": pool.status()})
        else:
            try:
                encoded = pool.encode(_handle(msg))
            except BaseException as err:  # noqa: B036 - the problem's failure, whatever it is, is data
                encoded = pool.encode(_failure(err))
        pool.send(sock, encoded, arena=arena)
        del encoded
        release_device_memory()  # what the problem's code cached: the parent and the candidates need it


def main(argv: list[str] | None = None) -> None:
    from solbench.worker import enter_sandbox, exit_now, parse_arguments

    args = parse_arguments(f"python -m {ENTRY}", argv)
    sock, sandbox = enter_sandbox(args)
    code = 1  # the channel closed or broke: the parent is gone, or stopped this host
    try:
        code = serve(sock, sandbox)
    finally:  # whatever ended the loop, what the problem's code started goes with this process
        sock.close()
        exit_now(code)


if __name__ == "__main__":
    main()
