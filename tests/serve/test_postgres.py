"""The service on PostgreSQL (``SOLBENCH_TEST_POSTGRES_URL``; skipped with the reason elsewhere): a
fresh database is migrated, a candidate submitted over HTTP is scored, a bad token is refused, and
a second server on the same database sees the same records."""

from __future__ import annotations

import json
import signal

import pytest
from serve_fixtures import (
    CANDIDATES,
    Server,
    free_port,
    fresh_postgres,
    make_token,
    postgres_url,
    request,
    submit,
    wait_final,
)

pytestmark = pytest.mark.slow


@pytest.mark.timeout(600)
def test_the_api_on_postgresql(tmp_path):
    db = fresh_postgres(postgres_url())
    token = make_token(db)
    server = Server(db, free_port(), ("--state-dir", str(tmp_path / "jobs")), log=tmp_path / "server.log").start()
    try:
        assert submit(server, "sb_wrong", CANDIDATES / "honest.py", ["tiny.scaled_add"])[0] == 401
        status, made = submit(server, token, CANDIDATES / "honest.py", ["tiny.scaled_add"], workloads=["n4"])
        assert status == 201, made
        sub = wait_final(server, made["id"])
    finally:
        server.kill(signal.SIGTERM)
    assert sub["state"] == "done" and [r["status"] for r in sub["records"]] == ["PASSED"]
    other = Server(db, free_port(), ("--state-dir", str(tmp_path / "jobs2")), log=tmp_path / "server2.log").start()
    try:
        board = json.loads(request(other, "GET", "/v1/leaderboard/tiny.scaled_add")[1])
    finally:
        other.kill(signal.SIGTERM)
    assert [r["candidate"] for r in board["rows"]] == [f"#{made['id']} honest"]
