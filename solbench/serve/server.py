"""Start the service: open (and migrate) the database, serve HTTP with uvicorn and run the scorer
until SIGINT or SIGTERM, then stop the jobs and put their unfinished submissions back in the queue
(uvicorn then re-raises the signal: a SIGTERM'd server exits as one, after its graceful shutdown)."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from solbench.errors import SolbenchError
from solbench.serve.app import Limits, create_app, library_by_name
from solbench.serve.scorer import Scorer, ScorerSettings
from solbench.serve.store import Store
from solbench.settings import SERVE_DB, SERVE_LEASE_S, SERVE_SHUTDOWN_GRACE_S

DEFAULT_PORT = 8000


@dataclass
class ServeConfig:
    db: str = SERVE_DB
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    settings: dict[str, Any] = field(default_factory=dict)
    """RunOptions fields every job runs with (device, gpu, gpus, cluster, budget_s, ...)."""
    limits: Limits = field(default_factory=Limits)
    state_dir: Path | None = None
    lease_s: float = SERVE_LEASE_S
    batch: int = 8
    slots: int = 1


def redacted(url: str) -> str:
    """The database URL without its password, for the log."""
    return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)


def default_state_dir(db: str) -> Path:
    """Job files beside a SQLite database (``serve.db`` -> ``serve.jobs/``), else ``./solbench-serve/``."""
    if db.startswith("sqlite:///") and db[len("sqlite:///"):] not in ("", ":memory:"):
        return Path(db[len("sqlite:///"):]).with_suffix(".jobs")
    return Path("solbench-serve")


def open_store(db: str) -> Store:
    try:
        import sqlalchemy  # noqa: F401
    except ImportError:
        raise SolbenchError('the service needs its extra: pip install "solbench[serve]"') from None
    return Store(db)


def queue_baselines(db: str, names: list[str], problems_dir: str | None, workloads: list[str],
                    small: bool) -> list[tuple[str, str, int]]:
    """Queue each shipped library baseline (``solutions/`` files that declare ``BASELINE``) of the named
    library problems, owned by the reserved ``library`` token: (problem, candidate, submission id)."""
    from solbench.worker import baseline_library

    store = open_store(db)
    library = library_by_name(problems_dir)
    missing = [n for n in names if n not in library]
    if missing:
        raise SolbenchError(f"no library problem {missing[0]!r} (`solbench list` names them)")
    token = store.library_token()
    queued = []
    for problem in (library[n] for n in dict.fromkeys(names)):
        for f in sorted((problem.folder / "solutions").glob("*.py")):
            if baseline_library(f):
                sub = store.submit(token, f.name, f.read_text(encoding="utf-8"), [problem.name], workloads, small, None)
                queued.append((problem.name, f.stem, sub))
    return queued


def serve(config: ServeConfig, log: Any = None) -> None:
    """Run the service in the foreground until interrupted."""
    from solbench.api import resolve_options

    try:
        import uvicorn
    except ImportError:
        raise SolbenchError('the service needs its extra: pip install "solbench[serve]"') from None
    resolve_options(**config.settings)  # a bad --device or --gpu is refused now, not by every job
    store = open_store(config.db)
    state_dir = (config.state_dir or default_state_dir(config.db)).resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    state_dir.chmod(0o700)  # every submission's source is kept here while it runs: the server's user alone
    scorer = Scorer(store, ScorerSettings(config.settings, state_dir, config.limits.problems_dir, config.lease_s,
                                          config.batch, config.slots))
    app = create_app(store, config.limits, scorer)
    server = uvicorn.Server(uvicorn.Config(app, host=config.host, port=config.port, log_level="warning",
                                           access_log=False, server_header=False,
                                           timeout_graceful_shutdown=SERVE_SHUTDOWN_GRACE_S))
    (log or _stderr)(f"solbench serve: http://{config.host}:{config.port}/ (database {redacted(config.db)}, "
                     f"{len(app.state.service.library)} library problems, jobs in {state_dir})")
    try:
        server.run()  # starts and stops the scorer (the app's lifespan)
    except SystemExit:  # uvicorn exits when it cannot listen
        if server.started:
            raise
    finally:
        store.close()
    if not server.started:
        raise SolbenchError(f"could not listen on {config.host}:{config.port} (in use? pass another --port)")


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
