"""The service's database: tokens, the durable submission queue and one row per result record.

One data-access layer (SQLAlchemy Core) over SQLite (a file, the default) or PostgreSQL. The schema
is made and upgraded by the alembic migrations beside this module; the tables are read back from the
database (reflected), so the migrations are the one place the schema is written down.

The queue: a submission is claimed by one statement that moves it from ``queued`` to ``running``
only while it is still queued, so two scorers never take the same one. A claimed submission carries
its scorer's heartbeat; one whose heartbeat is older than the lease (its server was killed) is put
back in the queue and run again, keeping the records it already has: a record is unique per
(submission, problem, workload, candidate), so nothing is ever scored twice.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from solbench.errors import SolbenchError

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
TOKEN_PREFIX = "sb_"
LIBRARY = "library"  # the reserved owner of the shipped library baselines (`solbench serve baselines`)
FINAL_STATES = ("done", "failed", "error")
MAX_ATTEMPTS = 3  # a submission whose scorer died this often is given up (state "error")
DAY_S = 86400.0


class QuotaError(SolbenchError):
    """A token's quota is used up (the API answers 429)."""


@dataclass(frozen=True)
class Token:
    id: int
    name: str
    per_day: int
    max_pending: int


def hash_token(raw: str) -> str:
    """Tokens are 256 random bits, so one SHA-256 (no salt, no stretching) keeps them safe at rest."""
    return hashlib.sha256(raw.encode("utf-8", "replace")).hexdigest()


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")  # readers (the pages) never wait for the scorer's writes
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def make_engine(url: str) -> Any:
    """An engine for ``sqlite:///PATH`` or ``postgresql://...`` (psycopg 3); anything else is refused."""
    import sqlalchemy as sa

    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///"):]
        if path and path != ":memory:":
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        sa.event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    if url.startswith(("postgresql://", "postgresql+psycopg://", "postgres://")):
        rest = url.split("://", 1)[1]
        return sa.create_engine(f"postgresql+psycopg://{rest}", pool_pre_ping=True)
    raise SolbenchError(f"--db {url.split(':', 1)[0]}:...: give sqlite:///PATH or postgresql://USER@HOST/DB")


def migrate(engine: Any) -> None:
    """Bring the schema to the newest version (alembic ``upgrade head``), in one transaction."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


class Store:
    """Every read and write of the service's tables."""

    def __init__(self, url: str):
        import sqlalchemy as sa

        self.url = url
        self.engine = make_engine(url)
        try:
            migrate(self.engine)
        except sa.exc.OperationalError as err:
            raise SolbenchError(f"--db: cannot open the database ({str(err.orig).splitlines()[0]})") from None
        meta = sa.MetaData()
        meta.reflect(bind=self.engine, only=["tokens", "submissions", "results"])
        self.tokens, self.subs, self.results = (meta.tables[n] for n in ("tokens", "submissions", "results"))

    # --- tokens -------------------------------------------------------------------------------
    def add_token(self, name: str, per_day: int, max_pending: int, reserved: bool = False) -> str:
        """A new token for ``name``; only its hash is kept, so this is the one time it is seen."""
        import sqlalchemy as sa

        if name == LIBRARY and not reserved:
            raise SolbenchError(f"the token name {LIBRARY!r} is reserved for the library baselines: pick another")
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        row = {"name": name, "token_hash": hash_token(raw), "created_at": time.time(), "per_day": per_day,
               "max_pending": max_pending, "revoked": False}
        try:
            with self.engine.begin() as conn:
                conn.execute(self.tokens.insert().values(**row))
        except sa.exc.IntegrityError:
            raise SolbenchError(f"a token named {name!r} exists already: pick another name or revoke it") from None
        return raw

    def revoke_token(self, name: str) -> bool:
        with self.engine.begin() as conn:
            done = conn.execute(self.tokens.update().where(self.tokens.c.name == name).values(revoked=True))
        return bool(done.rowcount)

    def list_tokens(self) -> list[dict[str, Any]]:
        t = self.tokens
        with self.engine.connect() as conn:
            rows = conn.execute(t.select().with_only_columns(t.c.name, t.c.created_at, t.c.per_day, t.c.max_pending,
                                                             t.c.revoked).order_by(t.c.id))
            return [dict(r._mapping) for r in rows]

    def library_token(self) -> Token:
        """The owner of the library baselines (made on first use; its value is never shown)."""
        t = self.tokens
        with self.engine.connect() as conn:
            row = conn.execute(t.select().where(t.c.name == LIBRARY)).first()
        if row is None:
            self.add_token(LIBRARY, 10**9, 10**9, reserved=True)
            return self.library_token()
        return Token(row.id, row.name, row.per_day, row.max_pending)

    def token(self, raw: str) -> Token | None:
        """The live token with this value, or None."""
        t = self.tokens
        with self.engine.connect() as conn:
            row = conn.execute(t.select().where(t.c.token_hash == hash_token(raw), t.c.revoked.is_(False))).first()
        return Token(row.id, row.name, row.per_day, row.max_pending) if row else None

    # --- submissions --------------------------------------------------------------------------
    def submit(self, token: Token, candidate: str, source: str, problems: list[str], workloads: list[str],
               small: bool, uploaded: dict[str, str] | None) -> int:
        """Queue a submission within the token's quotas (QuotaError when one is used up); its id."""
        import sqlalchemy as sa

        s = self.subs
        now = time.time()
        with self.engine.begin() as conn:
            mine = s.c.token_id == token.id
            pending = conn.execute(sa.select(sa.func.count()).where(mine, s.c.state.in_(("queued", "running")))).scalar()
            if pending >= token.max_pending:
                raise QuotaError(f"token {token.name!r} has {pending} submissions waiting (its limit): wait for "
                                 "some to finish")
            today = conn.execute(sa.select(sa.func.count()).where(mine, s.c.created_at > now - DAY_S)).scalar()
            if today >= token.per_day:
                raise QuotaError(f"token {token.name!r} made {today} submissions in the last 24 hours (its quota)")
            row = {"token_id": token.id, "state": "queued", "candidate": candidate, "source": source,
                   "problems": json.dumps(problems), "workloads": json.dumps(workloads), "small": small,
                   "uploaded": json.dumps(uploaded) if uploaded else None, "created_at": now, "attempts": 0}
            return int(conn.execute(s.insert().values(**row)).inserted_primary_key[0])

    def claim(self, worker: str, limit: int) -> list[dict[str, Any]]:
        """Take up to ``limit`` queued submissions, oldest first, for ``worker`` (a unique tag per call)."""
        import sqlalchemy as sa

        s = self.subs
        now = time.time()
        oldest = sa.select(s.c.id).where(s.c.state == "queued").order_by(s.c.id).limit(limit).scalar_subquery()
        with self.engine.begin() as conn:
            # One statement: a row is taken only while still queued, whoever else is claiming.
            conn.execute(s.update().where(s.c.id.in_(oldest), s.c.state == "queued").values(
                state="running", claimed_by=worker, heartbeat_at=now, started_at=now, attempts=s.c.attempts + 1))
            rows = conn.execute(s.select().where(s.c.claimed_by == worker, s.c.state == "running").order_by(s.c.id))
            return [dict(r._mapping) for r in rows]

    def heartbeat(self, workers: list[str]) -> None:
        if not workers:
            return
        s = self.subs
        with self.engine.begin() as conn:
            conn.execute(s.update().where(s.c.claimed_by.in_(workers), s.c.state == "running")
                         .values(heartbeat_at=time.time()))

    def requeue_stale(self, lease_s: float) -> list[int]:
        """Put back submissions whose scorer stopped beating for ``lease_s`` (its server died); give up
        on one that has been taken ``MAX_ATTEMPTS`` times. The ids put back."""
        s = self.subs
        stale = (s.c.state == "running") & (s.c.heartbeat_at < time.time() - lease_s)
        with self.engine.begin() as conn:
            conn.execute(s.update().where(stale, s.c.attempts >= MAX_ATTEMPTS).values(
                state="error", finished_at=time.time(),
                error=f"its scorer stopped {MAX_ATTEMPTS} times while running it; given up"))
            ids = [r.id for r in conn.execute(s.select().with_only_columns(s.c.id).where(stale))]
            if ids:
                conn.execute(s.update().where(s.c.id.in_(ids), stale).values(state="queued", claimed_by=None))
        return ids

    def release(self, ids: list[int]) -> None:
        """Back to the queue (the server is stopping): they run again, their records kept."""
        if ids:
            s = self.subs
            with self.engine.begin() as conn:
                conn.execute(s.update().where(s.c.id.in_(ids), s.c.state == "running").values(
                    state="queued", claimed_by=None, attempts=s.c.attempts - 1))

    def finish(self, sub_id: int, state: str, error: str | None = None) -> None:
        s = self.subs
        with self.engine.begin() as conn:
            conn.execute(s.update().where(s.c.id == sub_id, s.c.state == "running").values(
                state=state, error=error, finished_at=time.time()))

    def set_progress(self, sub_id: int, progress: dict[str, Any]) -> None:
        s = self.subs
        with self.engine.begin() as conn:
            conn.execute(s.update().where(s.c.id == sub_id).values(progress=json.dumps(progress)))

    def submission(self, sub_id: int) -> dict[str, Any] | None:
        """A submission's row (with its token's name, without its source), or None."""
        s, t = self.subs, self.tokens
        cols = [c for c in s.c if c.name not in ("source", "uploaded")]
        q = (s.join(t, s.c.token_id == t.c.id).select().with_only_columns(*cols, t.c.name.label("owner"))
             .where(s.c.id == sub_id))
        with self.engine.connect() as conn:
            row = conn.execute(q).first()
        return _decoded(dict(row._mapping)) if row else None

    def submissions(self, limit: int = 50) -> list[dict[str, Any]]:
        s, t = self.subs, self.tokens
        cols = [c for c in s.c if c.name not in ("source", "uploaded")]
        q = (s.join(t, s.c.token_id == t.c.id).select().with_only_columns(*cols, t.c.name.label("owner"))
             .order_by(s.c.id.desc()).limit(limit))
        with self.engine.connect() as conn:
            return [_decoded(dict(r._mapping)) for r in conn.execute(q)]

    def source(self, sub_id: int) -> tuple[str, dict[str, str] | None]:
        s = self.subs
        with self.engine.connect() as conn:
            row = conn.execute(s.select().with_only_columns(s.c.source, s.c.uploaded).where(s.c.id == sub_id)).one()
        return row.source, json.loads(row.uploaded) if row.uploaded else None

    # --- results ------------------------------------------------------------------------------
    def add_record(self, sub_id: int, record: dict[str, Any]) -> bool:
        """Keep one record of a submission; False when that (problem, workload, candidate) has one."""
        r = self.results
        row = {"submission_id": sub_id, "problem": str(record["problem"]), "workload": str(record["workload"]),
               "candidate": str(record["solution"]), "status": str(record["status"]), "gpu": record.get("gpu_spec"),
               "sol": record.get("sol"), "time_s": record.get("time_s"), "record": json.dumps(record),
               "created_at": time.time()}
        stmt = self._insert(r).values(**row).on_conflict_do_nothing(
            index_elements=["submission_id", "problem", "workload", "candidate"]).returning(r.c.id)
        with self.engine.begin() as conn:  # a row comes back only when one was inserted
            return conn.execute(stmt).first() is not None

    def _insert(self, table: Any) -> Any:
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        return insert(table)

    def records(self, sub_id: int | None = None, problem: str | None = None, after: int = 0,
                library_only: bool = False) -> list[dict[str, Any]]:
        import sqlalchemy as sa

        """Records as the JSONL records of ``solbench run`` (each with its row id as ``_row``, its
        submission as ``_submission`` and the submission's owner as ``_owner``), in the order made."""
        r, s, t = self.results, self.subs, self.tokens
        q = (sa.select(r.c.id, r.c.submission_id, r.c.record, t.c.name.label("owner"))
             .join_from(r, s, r.c.submission_id == s.c.id).join(t, s.c.token_id == t.c.id).where(r.c.id > after))
        if sub_id is not None:
            q = q.where(r.c.submission_id == sub_id)
        if problem is not None:
            q = q.where(r.c.problem == problem)
        if library_only:  # an uploaded problem may be named like a library one: never on its leaderboard
            q = q.where(s.c.uploaded.is_(None))
        with self.engine.connect() as conn:
            rows = conn.execute(q.order_by(r.c.id)).all()
        return [{**json.loads(row.record), "_row": row.id, "_submission": row.submission_id, "_owner": row.owner}
                for row in rows]

    def recorded(self, sub_id: int) -> set[tuple[str, str]]:
        """(problem, workload) pairs the submission has a record of."""
        r = self.results
        with self.engine.connect() as conn:
            rows = conn.execute(r.select().with_only_columns(r.c.problem, r.c.workload).where(r.c.submission_id == sub_id))
            return {(row.problem, row.workload) for row in rows}

    def scored_problems(self) -> list[tuple[str, str, int]]:
        """(problem, gpu, records) of the library problems that have records."""
        import sqlalchemy as sa

        r, s = self.results, self.subs
        q = (sa.select(r.c.problem, r.c.gpu, sa.func.count()).join_from(r, s, r.c.submission_id == s.c.id)
             .where(s.c.uploaded.is_(None)).group_by(r.c.problem, r.c.gpu).order_by(r.c.problem, r.c.gpu))
        with self.engine.connect() as conn:
            return [(row[0], row[1] or "", int(row[2])) for row in conn.execute(q)]

    def close(self) -> None:
        self.engine.dispose()


def _decoded(row: dict[str, Any]) -> dict[str, Any]:
    for key in ("problems", "workloads", "progress"):
        if row.get(key):
            row[key] = json.loads(row[key])
    return row
