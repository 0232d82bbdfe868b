"""Executors as Ray actors (``--cluster ray`` or ``--cluster ray://HOST:PORT``; ``pip install "solbench[cluster]"``).

Each actor holds one GPU (``num_gpus=1``; Ray sets its ``CUDA_VISIBLE_DEVICES``) or, on the CPU,
one core, on any node, and runs the same executor session as a local executor process. Its records
stream back to the driver (a streaming generator), the only writer. Actors are never restarted by
Ray (``max_restarts=0``): the driver sees a lost actor or node as an error of the item's stream,
starts a new actor (Ray places it where resources are left) and reruns the item once. Every node
must hold the problems and candidates at the same paths (a shared file system or the same
checkout) and solbench installed; a candidate that differs from the driver's copy is refused.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from solbench.dispatch.items import WorkItem
from solbench.dispatch.local import ExecutorLost, ExecutorStartError
from solbench.dispatch.session import ExecutorSession
from solbench.engine import RunOptions
from solbench.errors import SolbenchError
from solbench.settings import ACTOR_START_TIMEOUT_S, ACTOR_STOP_TIMEOUT_S

_started_here = False
_actor_class: Any = None


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise SolbenchError('--cluster ray needs Ray: pip install "solbench[cluster]"') from None
    return ray


def connect(address: str) -> None:
    """Join the Ray cluster at ``ray://HOST:PORT``, or start a local one for ``ray`` (unless connected)."""
    global _started_here
    ray = _ray()
    if ray.is_initialized():
        return
    if address != "ray" and not address.startswith("ray://"):
        raise SolbenchError(f"--cluster {address}: use ray (a local Ray instance) or ray://HOST:PORT")
    try:
        if address == "ray":
            ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
        else:
            ray.init(address=address, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as err:
        raise SolbenchError(f"--cluster {address}: could not connect ({err}); is the cluster up?") from None
    _started_here = True


def disconnect() -> None:
    """Shut Ray down if this process started or joined it (a caller's own session stays)."""
    global _started_here
    if _started_here:
        _ray().shutdown()
        _started_here = False


class ExecutorActor:
    """The Ray actor: an executor session on the GPU (or core) Ray gave it."""

    def __init__(self, start: dict[str, Any]):
        import ray

        gpu_ids = ray.get_gpu_ids()
        index = int(gpu_ids[0]) if gpu_ids else None
        self.node = ray.get_runtime_context().get_node_id()
        self.session = ExecutorSession(start | {"device_index": index})

    def hello(self) -> dict[str, Any]:
        return self.session.hello() | {"node": self.node}

    def run(self, message: dict[str, Any]) -> Iterator[dict[str, Any]]:
        yield from self.session.stream(message)

    def close(self) -> None:
        self.session.close()  # the workers started ahead for an item that never came

    def pid(self) -> int:
        return os.getpid()


def actor_class() -> Any:
    global _actor_class
    if _actor_class is None:
        _actor_class = _ray().remote(max_restarts=0, max_task_retries=0)(ExecutorActor)
    return _actor_class


class RayExecutor:
    """A handle on one executor actor; a new actor on each start (the old one is gone or was killed)."""

    def __init__(self, label: str, resources: dict[str, float]):
        self.label = label
        self.resources = resources
        self.actor: Any = None

    def start(self, start: dict[str, Any]) -> dict[str, Any]:
        ray = _ray()
        self.actor = actor_class().options(**self.resources).remote(start)
        try:
            return ray.get(self.actor.hello.remote(), timeout=ACTOR_START_TIMEOUT_S)
        except Exception as err:  # noqa: BLE001 - ray's errors, GetTimeoutError: no actor here
            raise ExecutorStartError(f"actor {self.label}: {_one_line(err)}") from None

    def run(self, item: WorkItem) -> Iterator[dict[str, Any]]:
        ray = _ray()
        stream = self.actor.run.options(num_returns="streaming").remote(item.as_message())
        try:
            for ref in stream:
                yield ray.get(ref)
        except ray.exceptions.RayError as err:
            raise ExecutorLost(f"actor {self.label} was lost: {_one_line(err)}") from None

    def close(self) -> None:
        if self.actor is None:
            return
        ray, actor, self.actor = _ray(), self.actor, None
        try:  # a clean exit runs the session's clean-up (its workers); a kill if that hangs
            ray.get(actor.close.remote(), timeout=ACTOR_STOP_TIMEOUT_S)
            ray.get(actor.__ray_terminate__.remote(), timeout=ACTOR_STOP_TIMEOUT_S)
        except Exception:  # noqa: BLE001, S110 - already gone
            pass
        ray.kill(actor, no_restart=True)


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0][:300] if text else type(err).__name__


def ray_executors(options: RunOptions) -> list[RayExecutor]:
    """One actor per GPU of the cluster, or ``--jobs`` actors (default: one per node) on the CPU."""
    connect(options.cluster or "ray")
    ray = _ray()
    if options.device.startswith("cuda"):
        gpus = int(ray.cluster_resources().get("GPU", 0))
        if gpus == 0:
            raise SolbenchError(f"--cluster {options.cluster}: the cluster has no GPU; use --device cpu --jobs N")
        return [RayExecutor(f"ray-gpu{i}", {"num_gpus": 1, "num_cpus": 0}) for i in range(gpus)]
    jobs = options.jobs or len([n for n in ray.nodes() if n.get("Alive")])
    return [RayExecutor(f"ray-cpu{i}", {"num_cpus": 1}) for i in range(jobs)]
