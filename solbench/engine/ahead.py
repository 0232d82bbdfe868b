"""Lanes made ready ahead, off the lanes' threads: the next lanes' workers loaded and their shapes compiled.

On a GPU a lane's worker is made ready before its first record reserves memory (``Runner._prepare``: the
candidate loaded and, for one that compiles per shape, every workload's shape compiled). Done on the lane's own
thread, that is lane time no record advances in: H200 call 31 (2026-12-03), 537 of the lanes' 2,508 lane-seconds
went to workers' warm-ups (411 s) and waits for them (126 s), while the timing windows held the device a third of
the run. Here a few threads do it for the lanes next in line, in their order, while the lanes in flight run their
records; a lane that begins takes its preparation (waiting for it if it has begun, else doing it itself). Off by
default (``PREPARE_AHEAD``: measured, it did not make the pass faster).

A preparation can be cancelled (the run stops, or its lane will not run here): it stops between its steps, and
its worker is stopped by the caller.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

# Lanes prepared at once ahead of those in flight, by default: none. Measured on the H200 (2026-12-03) on the 232
# records calls 31-33 share: call 31 (none ahead) held 8,765 GiB-s of memory and its lanes waited 401 s for memory and
# 126 s for workers; call 32 (4 ahead) 11,856 GiB-s, 1,117 s and 911 s; call 33 (6 ahead, a lane taking back a
# preparation not begun) 10,745 GiB-s, 1,191 s and 434 s. Kept as a setting (Runner.prepare_ahead,
# ``library_throughput.py --prepare-ahead``) to measure again.
PREPARE_AHEAD = 0


@dataclass
class Preparation:
    """One lane's preparation in progress or done: its result (``future``), and what cancels it."""

    future: Future[Any]
    cancel: threading.Event = field(default_factory=threading.Event)

    def result(self) -> Any:
        """What the preparation returned; None when it failed or was cancelled before it ran."""
        try:
            return self.future.result()
        except BaseException:  # noqa: BLE001 - the lane prepares itself instead, and reports what fails then
            return None


class Preparations:
    """Lanes' preparations by key, run on up to ``workers`` threads in the order they were asked for."""

    def __init__(self, workers: int) -> None:
        self.workers = max(0, workers)
        self._lock = threading.Lock()
        self._entries: dict[Hashable, Preparation] = {}
        self._pool: ThreadPoolExecutor | None = None

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    def ask(self, key: Hashable, prepare: Callable[[threading.Event], Any]) -> bool:
        """Prepare ``key`` (``prepare(cancel)``) unless it is asked for already or this prepares nothing."""
        if not self.workers:
            return False
        with self._lock:
            if key in self._entries:
                return False
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="prepare-ahead")
            cancel = threading.Event()
            self._entries[key] = Preparation(self._pool.submit(prepare, cancel), cancel)
        return True

    def take(self, key: Hashable) -> Preparation | None:
        """The preparation of ``key`` (no longer kept here), or None when none was asked for."""
        with self._lock:
            return self._entries.pop(key, None)

    def cancel(self, keep: frozenset[Hashable] | set[Hashable] = frozenset()) -> list[Preparation]:
        """Cancel every preparation but those of ``keep``; returns them (the caller stops their workers, then
        waits for them: :meth:`Preparation.result`)."""
        with self._lock:
            gone = [self._entries.pop(k) for k in [k for k in self._entries if k not in keep]]
        for prep in gone:
            prep.cancel.set()
            prep.future.cancel()  # one not begun never runs
        return gone

    def close(self) -> None:
        """Cancel all and let the threads go once the running ones end."""
        self.cancel()
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
