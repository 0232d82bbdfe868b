"""The server's scorer: takes queued submissions from the database and scores them in job processes.

Each slot (one by default: on one GPU, runs side by side would time each other) claims up to
``batch`` submissions at once and starts one job process for them (:mod:`solbench.serve.job`: one
interpreter start for the batch), then reads the job's events as they come, keeping each record in
the database the moment it arrives. A heartbeat marks the claimed submissions alive; one left
without for ``lease_s`` (a server killed) is put back in the queue by whichever server sees it,
and run again without the workloads it already has records of.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from solbench.serve.store import Store
from solbench.settings import SERVE_LEASE_S, SERVE_POLL_S, SERVE_STOP_WAIT_S

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding this solbench package


@dataclass
class ScorerSettings:
    settings: dict[str, Any]
    """RunOptions fields for every job (device, gpu, budget_s, ...), validated when the server starts."""
    state_dir: Path
    """Where jobs keep their files (candidates, uploaded problems, records, logs)."""
    problems_dir: str | None = None
    lease_s: float = SERVE_LEASE_S
    batch: int = 8
    slots: int = 1


@dataclass
class _Batch:
    rows: list[dict[str, Any]]
    folder: Path
    open_ids: set[int] = field(default_factory=set)
    offset: int = 0
    proc: subprocess.Popen | None = None


class Scorer:
    """Slots that claim and run submissions, and the heartbeat that keeps their claims alive."""

    def __init__(self, store: Store, config: ScorerSettings):
        self.store, self.config = store, config
        self.server_id = uuid.uuid4().hex[:12]
        self.stopping = threading.Event()
        self.batches: dict[str, _Batch] = {}
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        self.store.requeue_stale(self.config.lease_s)
        targets = [self._beat] + [self._slot] * self.config.slots
        self.threads = [threading.Thread(target=t, args=(i,), daemon=True, name=f"scorer-{i}")
                        for i, t in enumerate(targets)]
        for t in self.threads:
            t.start()

    def stop(self, wait_s: float = SERVE_STOP_WAIT_S) -> None:
        """Stop the jobs (their engines stop their workers) and put what they had not finished back."""
        self.stopping.set()
        with self.lock:
            procs = [b.proc for b in self.batches.values() if b.proc is not None]
        for proc in procs:
            _signal_group(proc, signal.SIGTERM)
        for t in self.threads:
            t.join(wait_s)

    # --- threads ------------------------------------------------------------------------------
    def _beat(self, _index: int) -> None:
        every = max(self.config.lease_s / 3, 0.2)
        while not self.stopping.wait(every):
            with self.lock:
                tags = list(self.batches)
            try:
                self.store.heartbeat(tags)
                self.store.requeue_stale(self.config.lease_s)
            except Exception as err:  # a database hiccup must not stop the heartbeat for good
                print(f"solbench serve: heartbeat failed: {type(err).__name__}: {err}", file=sys.stderr)

    def _slot(self, index: int) -> None:
        n = 0
        while not self.stopping.is_set():
            n += 1
            tag = f"{self.server_id}-{index}-{n}"
            try:
                rows = self.store.claim(tag, self.config.batch)
            except Exception as err:
                print(f"solbench serve: claim failed: {type(err).__name__}: {err}", file=sys.stderr)
                rows = []
            if not rows:
                self.stopping.wait(SERVE_POLL_S * 2)
                continue
            try:
                self._run(tag, rows)
            except Exception as err:  # the slot goes on; what the batch left is an error, not lost
                why = f"{type(err).__name__}: {err}"
                print(f"solbench serve: a batch failed: {why}", file=sys.stderr)
                self._give_up(rows, why)

    # --- one batch ----------------------------------------------------------------------------
    def _run(self, tag: str, rows: list[dict[str, Any]]) -> None:
        folder = self.config.state_dir / "jobs" / tag
        batch = _Batch(rows, folder, {r["id"] for r in rows})
        with self.lock:
            self.batches[tag] = batch
        try:
            items = [self._prepare(row, folder / f"s{row['id']}") for row in rows]
            batch.proc = self._start_job(folder, items)
            if self.stopping.is_set():  # stop() came between the claim and the start
                _signal_group(batch.proc, signal.SIGTERM)
            while batch.proc.poll() is None:
                self._read_events(batch)
                time.sleep(SERVE_POLL_S)
            self._read_events(batch)
            self._close(batch, batch.proc.returncode)
        finally:
            if batch.proc is not None and batch.proc.poll() is None:  # this thread failed: no job left behind
                _signal_group(batch.proc, signal.SIGTERM)
                batch.proc.wait()
            with self.lock:
                self.batches.pop(tag, None)
            shutil.rmtree(folder, ignore_errors=True)

    def _give_up(self, rows: list[dict[str, Any]], why: str) -> None:
        for row in rows:
            try:
                self.store.finish(row["id"], "error", f"the server could not run it ({why[:200]})")
            except Exception:  # the database is gone too: the lease puts it back later
                pass

    def _prepare(self, row: dict[str, Any], folder: Path) -> dict[str, Any]:
        """The submission's files in its own folder, and its part of the job file."""
        folder.mkdir(parents=True, exist_ok=True)
        source, uploaded = self.store.source(row["id"])
        solution = folder / row["candidate"]
        solution.write_text(source, encoding="utf-8")
        problems = json.loads(row["problems"])
        if uploaded:
            (folder / "problem").mkdir()
            for name, text in uploaded.items():  # names were checked on the way in: plain file names
                (folder / "problem" / name).write_text(text, encoding="utf-8")
            problems = [str(folder / "problem")]
        return {"submission": row["id"], "problems": problems, "solution": str(solution),
                "workloads": json.loads(row["workloads"]), "small": bool(row["small"]),
                "done": sorted(self.store.recorded(row["id"])), "output": str(folder / "records.jsonl")}

    def _start_job(self, folder: Path, items: list[dict[str, Any]]) -> subprocess.Popen:
        job = {"settings": self.config.settings, "problems_dir": self.config.problems_dir, "items": items,
               "events": str(folder / "events.jsonl")}
        (folder / "job.json").write_text(json.dumps(job), encoding="utf-8")
        (folder / "events.jsonl").touch()
        # The job imports the server's own solbench (its cwd is the job folder, never a checkout).
        path = os.pathsep.join(p for p in (str(PACKAGE_ROOT), os.environ.get("PYTHONPATH", "")) if p)
        env = {**os.environ, "SOLBENCH_SERVE_PARENT": str(os.getpid()), "PYTHONPATH": path}
        with open(folder / "job.log", "wb") as log:
            return subprocess.Popen([sys.executable, "-m", "solbench.serve.job", str(folder / "job.json")],
                                    cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)

    def _read_events(self, batch: _Batch) -> None:
        """Apply the complete lines the job appended since the last look."""
        with open(batch.folder / "events.jsonl", "rb") as fh:
            fh.seek(batch.offset)
            data = fh.read()
        end = data.rfind(b"\n") + 1
        batch.offset += end
        for line in data[:end].splitlines():
            self._apply(batch, json.loads(line))

    def _apply(self, batch: _Batch, event: dict[str, Any]) -> None:
        sub, kind = int(event["submission"]), event["event"]
        if sub not in batch.open_ids:
            return
        if kind == "record":
            self.store.add_record(sub, event["record"])
            self._count(batch, sub)
        elif kind == "begin":
            self._progress(batch, sub, total=event["total"], done=0)
        elif kind == "task":
            self._progress(batch, sub, current=f"{event['problem']} {event['workload']} {event['candidate']}")
        elif kind in ("done", "failed"):
            self.store.finish(sub, kind, event.get("reason"))
            batch.open_ids.discard(sub)

    def _progress(self, batch: _Batch, sub: int, **change: Any) -> None:
        row = next(r for r in batch.rows if r["id"] == sub)
        row["_progress"] = {**row.get("_progress", {}), **change}
        self.store.set_progress(sub, row["_progress"])

    def _count(self, batch: _Batch, sub: int) -> None:
        row = next(r for r in batch.rows if r["id"] == sub)
        self._progress(batch, sub, done=row.get("_progress", {}).get("done", 0) + 1)

    def _close(self, batch: _Batch, returncode: int) -> None:
        """What the job left unfinished: back to the queue if the server is stopping, else an error."""
        left = sorted(batch.open_ids)
        if self.stopping.is_set():
            self.store.release(left)
            return
        why = _last_line(batch.folder / "job.log") or f"exit code {returncode}"
        for sub in left:
            self.store.finish(sub, "error", f"the scoring process stopped before the end ({why})")


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _last_line(path: Path, limit: int = 300) -> str:
    try:
        lines = path.read_bytes()[-4096:].decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return ""
    return " ".join(lines[-1].split())[:limit] if lines else ""
