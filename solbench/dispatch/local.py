"""Executors on this machine: one process per GPU (``--gpus``) or N on the CPU (``--jobs N``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import IO, Any

from solbench.dispatch.items import WorkItem
from solbench.errors import SolbenchError
from solbench.settings import EXECUTOR_EXIT_WAIT_S
from solbench.worker import describe_exit


class ExecutorLost(Exception):
    """An executor died or vanished while running an item (its records so far still count)."""


class ExecutorStartError(Exception):
    """An executor could not be started (or said why it cannot run)."""


class LocalExecutor:
    """A handle on one executor process: start it, run items through it, close it."""

    def __init__(self, label: str, device_index: int | None = None, visible: str | None = None,
                 cpus: list[int] | None = None):
        self.label = label
        self.device_index = device_index
        self.visible = visible  # CUDA_VISIBLE_DEVICES for the process: its one GPU
        self.cpus = cpus
        self.proc: subprocess.Popen[str] | None = None
        self.results: IO[str] | None = None

    def start(self, start: dict[str, Any]) -> dict[str, Any]:
        env = dict(os.environ)
        if self.visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.visible
        read_end, write_end = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "solbench.dispatch.executor", "--result-fd", str(write_end)],
                stdin=subprocess.PIPE, stdout=2, env=env, pass_fds=(write_end,), text=True)
        finally:
            os.close(write_end)
        self.results = os.fdopen(read_end, "r", encoding="utf-8")
        self._send(start | {"device_index": self.device_index, "cpus": self.cpus})
        try:
            hello = self._read()
        except ExecutorLost as err:
            raise ExecutorStartError(str(err)) from None
        if hello.get("kind") != "hello":
            raise ExecutorStartError(str(hello.get("reason") or hello))
        return hello

    def run(self, item: WorkItem) -> Iterator[dict[str, Any]]:
        """The item's messages as they come, ``done`` last; :class:`ExecutorLost` if the process dies."""
        self._send(item.as_message())
        while True:
            message = self._read()
            yield message
            if message.get("kind") == "done":
                return

    def close(self) -> None:
        if self.proc is None:
            return
        try:
            self.proc.stdin.close()  # EOF: the executor finishes and exits
        except OSError:
            pass
        try:
            self.proc.wait(EXECUTOR_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.terminate()  # SIGTERM: it kills its workers on the way out
            try:
                self.proc.wait(EXECUTOR_EXIT_WAIT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.results is not None:
            self.results.close()
        self.proc = None

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
        except OSError:
            raise ExecutorLost(self._exit_reason()) from None

    def _read(self) -> dict[str, Any]:
        assert self.results is not None
        line = self.results.readline()
        if not line:
            raise ExecutorLost(self._exit_reason())
        return json.loads(line)

    def _exit_reason(self) -> str:
        assert self.proc is not None
        try:
            code = self.proc.wait(EXECUTOR_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            code = None
        return f"executor {self.label} (pid {self.proc.pid}) {describe_exit(code)}"


def _visible_ids() -> list[str] | None:
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    return None if value is None else [v.strip() for v in value.split(",") if v.strip()]


def gpu_indices(gpus: str, count: int) -> list[int]:
    """``all`` or ``0,1,...`` as GPU indices of this machine (as torch numbers them), checked."""
    if count == 0:
        raise SolbenchError("--gpus: no CUDA device is visible here: use --device cpu --jobs N")
    if gpus == "all":
        return list(range(count))
    indices = [int(part) for part in gpus.split(",")]
    bad = [i for i in indices if i >= count]
    if bad:
        raise SolbenchError(f"--gpus {gpus}: no GPU {bad[0]} here ({count} visible: 0..{count - 1})")
    if len(set(indices)) != len(indices):
        raise SolbenchError(f"--gpus {gpus}: a GPU is named twice")
    return indices


def gpu_executors(gpus: str) -> list[LocalExecutor]:
    """One executor per GPU, each seeing only its own (``CUDA_VISIBLE_DEVICES``, mapped through this
    process's own setting when it has one)."""
    import torch

    visible = _visible_ids()
    out = []
    for i in gpu_indices(gpus, torch.cuda.device_count()):
        device_id = visible[i] if visible is not None else str(i)
        out.append(LocalExecutor(f"gpu{i}", device_index=i, visible=device_id))
    return out


def cpu_shares(jobs: int, cores: list[int]) -> list[list[int] | None]:
    """Contiguous shares of the cores, one per job (None for all when there are more jobs than cores)."""
    if jobs > len(cores):
        return [None] * jobs
    size, extra = divmod(len(cores), jobs)
    shares, at = [], 0
    for j in range(jobs):
        n = size + (1 if j < extra else 0)
        shares.append(cores[at:at + n])
        at += n
    return shares


def cpu_executors(jobs: int) -> list[LocalExecutor]:
    """N executors on the CPU, each pinned to its share of this process's cores."""
    shares = cpu_shares(jobs, sorted(os.sched_getaffinity(0)))
    return [LocalExecutor(f"cpu{j}", cpus=share) for j, share in enumerate(shares)]
