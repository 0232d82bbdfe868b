"""Hostile requests against a running `solbench serve`: each gets a 4xx with one line of reason (no
500, no traceback), nothing is queued, and the server stays up and answers afterwards."""

from __future__ import annotations

import json
import sqlite3

import pytest
from serve_fixtures import Server, free_port, make_token, request

pytestmark = pytest.mark.slow

GOOD = {"filename": "kernel.py", "source": "def run(x, y):\n    return x * 2 + y\n", "problems": ["tiny.scaled_add"]}
JSON = {"Content-Type": "application/json"}


def _with(**change) -> dict:
    return {**GOOD, **change}


# (name, method, path, body, headers, expected status or None for any 4xx); "{auth}" is the good token.
CASES = [
    ("no token", "POST", "/v1/submissions", GOOD, {}, 401),
    ("basic auth", "POST", "/v1/submissions", GOOD, {"Authorization": "Basic dXNlcjpwYXNz"}, 401),
    ("unknown token", "POST", "/v1/submissions", GOOD, {"Authorization": "Bearer sb_notatoken"}, 401),
    ("empty bearer", "POST", "/v1/submissions", GOOD, {"Authorization": "Bearer "}, 401),
    ("huge token", "POST", "/v1/submissions", GOOD, {"Authorization": "Bearer " + "A" * 20000}, 401),
    ("sql in token", "POST", "/v1/submissions", GOOD, {"Authorization": "Bearer ' OR 1=1 --"}, 401),
    ("malformed json", "POST", "/v1/submissions", '{"filename": "k.py", ', {**JSON, "auth": 1}, 422),
    ("json array", "POST", "/v1/submissions", "[1, 2, 3]", {**JSON, "auth": 1}, 422),
    ("json null", "POST", "/v1/submissions", "null", {**JSON, "auth": 1}, 422),
    ("deep nesting", "POST", "/v1/submissions", "[" * 200000 + "]" * 200000, {**JSON, "auth": 1}, None),
    ("huge body", "POST", "/v1/submissions", "x" * (3 * 1024 * 1024), {**JSON, "auth": 1}, 413),
    ("huge source", "POST", "/v1/submissions", _with(source="#" * (300 * 1024)), {"auth": 1}, 413),
    ("path in filename", "POST", "/v1/submissions", _with(filename="../../etc/cron.d/x.py"), {"auth": 1}, 422),
    ("absolute filename", "POST", "/v1/submissions", _with(filename="/tmp/x.py"), {"auth": 1}, 422),
    ("html filename", "POST", "/v1/submissions", _with(filename="<script>alert(1)</script>.py"), {"auth": 1}, 422),
    ("shell filename", "POST", "/v1/submissions", _with(filename="x.sh"), {"auth": 1}, 422),
    ("nul in filename", "POST", "/v1/submissions", _with(filename="a\x00.py"), {"auth": 1}, 422),
    ("long filename", "POST", "/v1/submissions", _with(filename="a" * 5000 + ".py"), {"auth": 1}, 422),
    ("empty source", "POST", "/v1/submissions", _with(source="   \n"), {"auth": 1}, 422),
    ("source a number", "POST", "/v1/submissions", _with(source=12), {"auth": 1}, 422),
    ("path as problem", "POST", "/v1/submissions", _with(problems=["../../../etc/passwd"]), {"auth": 1}, 422),
    ("absolute problem", "POST", "/v1/submissions", _with(problems=["/etc/passwd"]), {"auth": 1}, 422),
    ("html problem", "POST", "/v1/submissions", _with(problems=["<img src=x onerror=alert(1)>"]), {"auth": 1}, 422),
    ("bidi problem", "POST", "/v1/submissions", _with(problems=["tiny\u202e.scaled_add"]), {"auth": 1}, 422),
    ("unknown problem", "POST", "/v1/submissions", _with(problems=["tiny.no_such_problem"]), {"auth": 1}, 404),
    ("no problem", "POST", "/v1/submissions", _with(problems=[]), {"auth": 1}, 422),
    ("many problems", "POST", "/v1/submissions", _with(problems=["tiny.scaled_add"] * 1000), {"auth": 1}, 422),
    ("unknown workload", "POST", "/v1/submissions", _with(workloads=["n99"]), {"auth": 1}, 422),
    ("html workload", "POST", "/v1/submissions", _with(workloads=["<b>n4</b>"]), {"auth": 1}, 422),
    ("extra field", "POST", "/v1/submissions", _with(run_as="root"), {"auth": 1}, 422),
    ("small not a bool", "POST", "/v1/submissions", _with(small="maybe"), {"auth": 1}, 422),
    ("upload not allowed", "POST", "/v1/submissions",
     {**{k: v for k, v in GOOD.items() if k != "problems"}, "problem_files": {"problem.yaml": "name: x"}}, {"auth": 1},
     403),
    ("text/plain body", "POST", "/v1/submissions", json.dumps(GOOD), {"Content-Type": "text/plain", "auth": 1}, 422),
    ("id not a number", "GET", "/v1/submissions/abc", None, {}, 422),
    ("id too large", "GET", "/v1/submissions/99999999999999999999999", None, {}, 422),
    ("id zero", "GET", "/v1/submissions/0", None, {}, 422),
    ("unknown id", "GET", "/v1/submissions/424242", None, {}, 404),
    ("unknown id events", "GET", "/v1/submissions/424242/events", None, {}, 404),
    ("negative after", "GET", "/v1/submissions/1?after=-5", None, {}, 422),
    ("html leaderboard", "GET", "/v1/leaderboard/%3Cscript%3Ealert(1)%3C%2Fscript%3E", None, {}, 404),
    ("path leaderboard", "GET", "/v1/leaderboard/..%2F..%2Fetc%2Fpasswd", None, {}, 404),
    ("long gpu", "GET", "/v1/leaderboard/tiny.scaled_add?gpu=" + "h" * 1000, None, {}, 422),
    ("unknown leaderboard page", "GET", "/leaderboard/nope", None, {}, 404),
    ("negative submission page", "GET", "/submissions/-1", None, {}, 422),
    ("unknown page", "GET", "/wp-admin/setup.php", None, {}, 404),
    ("put", "PUT", "/v1/submissions", GOOD, {"auth": 1}, 405),
    ("delete", "DELETE", "/v1/submissions/1", None, {"auth": 1}, 405),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    db = f"sqlite:///{tmp / 'serve.db'}"
    token = make_token(db)
    srv = Server(db, free_port(), (), log=tmp / "server.log").start()
    yield srv, token, tmp
    srv.kill()


def test_there_are_at_least_30_cases():
    assert len(CASES) >= 30 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_hostile_request_gets_a_4xx_of_one_line(server, case):
    srv, token, _ = server
    _, method, path, body, headers, expected = case
    headers = dict(headers)
    if headers.pop("auth", None):
        headers["Authorization"] = f"Bearer {token}"
    if isinstance(body, dict):
        body, headers = json.dumps(body), {"Content-Type": "application/json", **headers}
    status, data, got = request(srv, method, path, body, headers)
    assert 400 <= status < 500, (status, data[:300])
    if expected is not None:
        assert status == expected, data[:300]
    assert got.get("content-type", "").startswith("application/json"), got
    reason = json.loads(data)["error"]
    assert reason and "\n" not in reason and "Traceback" not in reason and len(reason) <= 300


def test_a_token_over_its_quota_gets_429(server):
    srv, _, _ = server
    capped = make_token(srv.db, "capped", "--per-day", "0")
    status, data, _ = request(srv, "POST", "/v1/submissions", json.dumps(GOOD),
                              {"Content-Type": "application/json", "Authorization": f"Bearer {capped}"})
    assert status == 429 and "quota" in json.loads(data)["error"]


def test_after_it_all_the_server_is_up_and_queued_nothing(server):
    srv, _, tmp = server
    assert srv.proc.poll() is None
    status, page, _ = request(srv, "GET", "/")
    assert status == 200 and b"solbench serve" in page
    with sqlite3.connect(tmp / "serve.db") as conn:
        assert conn.execute("SELECT count(*) FROM submissions").fetchone() == (0,)
    assert "Traceback" not in srv.log_text()
