"""The service's database layer (solbench.serve.store) on SQLite, and on PostgreSQL when one is
given: migrations, tokens hashed at rest, quotas, the queue's claims and its exactly-once records."""

from __future__ import annotations

import threading
import time

import pytest
from serve_fixtures import fresh_postgres, postgres_url

from solbench.errors import SolbenchError
from solbench.serve.store import MAX_ATTEMPTS, QuotaError, Store, hash_token


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'serve.db'}"
    else:
        url = fresh_postgres(postgres_url())
    s = Store(url)
    yield s
    s.close()


def _queue(store: Store, n: int, token_name: str = "t") -> tuple[object, list[int]]:
    token = store.token(store.add_token(token_name, 1000, 1000))
    return token, [store.submit(token, f"c{i}.py", "def run(x):\n    return x\n", ["tiny.scaled_add"], [], False, None)
                   for i in range(n)]


def test_migrations_are_idempotent_and_versioned(store):
    again = Store(store.url)  # a second open upgrades nothing and keeps the rows
    token, ids = _queue(store, 1)
    assert again.submission(ids[0])["state"] == "queued"
    with store.engine.connect() as conn:
        import sqlalchemy as sa

        assert conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar() == "0001"
    again.close()


def test_tokens_are_kept_as_hashes_only(store, tmp_path):
    raw = store.add_token("alice", 5, 2)
    assert raw.startswith("sb_") and len(raw) > 40
    assert store.token(raw).name == "alice" and store.token(raw + "x") is None
    with store.engine.connect() as conn:
        import sqlalchemy as sa

        values = [tuple(r) for r in conn.execute(sa.text("SELECT * FROM tokens"))]
    flat = " ".join(map(str, values))
    assert raw not in flat and hash_token(raw) in flat
    with pytest.raises(SolbenchError, match="exists already"):
        store.add_token("alice", 5, 2)
    assert store.revoke_token("alice") and store.token(raw) is None


def test_quotas(store):
    token = store.token(store.add_token("q", per_day=3, max_pending=2))
    args = ("c.py", "src", ["p"], [], False, None)
    a, b = store.submit(token, *args), store.submit(token, *args)
    with pytest.raises(QuotaError, match="2 submissions waiting"):
        store.submit(token, *args)
    store.claim("w", 1)
    store.finish(a, "done")
    store.submit(token, *args)  # one slot free again
    store.claim("w2", 5)
    store.finish(b, "done")
    with pytest.raises(QuotaError, match="in the last 24 hours"):
        store.submit(token, *args)


def test_concurrent_claims_never_share_a_submission(store):
    _, ids = _queue(store, 12)
    got: dict[str, list[int]] = {}

    def claim(tag: str) -> None:
        taken, n = [], 0
        while rows := store.claim(f"{tag}-{n}", 2):  # a tag per claim, as the scorer's
            taken += [r["id"] for r in rows]
            n += 1
        got[tag] = taken

    threads = [threading.Thread(target=claim, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    everything = [i for taken in got.values() for i in taken]
    assert sorted(everything) == ids  # each taken once, none left


def test_a_dead_scorers_submission_is_queued_again_and_keeps_its_records(store):
    _, (sub,) = _queue(store, 1)
    store.claim("dead", 1)
    rec = {"problem": "p", "workload": "w1", "solution": "c0", "status": "PASSED", "sol": 0.5, "time_s": 1e-3}
    assert store.add_record(sub, rec)
    assert store.requeue_stale(lease_s=60) == []  # its heartbeat is fresh
    time.sleep(0.3)
    assert store.requeue_stale(lease_s=0.1) == [sub]
    assert store.submission(sub)["state"] == "queued"
    (again,) = store.claim("alive", 1)
    assert again["attempts"] == 2
    assert not store.add_record(sub, {**rec, "sol": 0.9})  # the same key: kept once, the first one
    assert [r["sol"] for r in store.records(sub)] == [0.5] and store.recorded(sub) == {("p", "w1")}


def test_a_submission_that_kills_its_scorer_is_given_up(store):
    _, (sub,) = _queue(store, 1)
    for _ in range(MAX_ATTEMPTS):
        store.claim("x", 1)
        time.sleep(0.05)
        store.requeue_stale(lease_s=0.01)
    row = store.submission(sub)
    assert row["state"] == "error" and "given up" in row["error"]


def test_release_puts_back_without_counting_an_attempt(store):
    _, (sub,) = _queue(store, 1)
    store.claim("x", 1)
    store.release([sub])
    row = store.submission(sub)
    assert row["state"] == "queued" and row["attempts"] == 0


def test_a_bad_database_url_is_one_line(tmp_path):
    with pytest.raises(SolbenchError, match="give sqlite:///PATH or postgresql://"):
        Store("mysql://x/y")
