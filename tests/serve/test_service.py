"""`solbench serve` end to end on the CPU: candidates submitted over HTTP with a token get the statuses
`solbench run` gives them; `solbench submit --wait` prints run's table; the records stream as
server-sent events, export as the JSONL of `run`, and show on the leaderboard page, rendered by
headless Chromium with nothing of a candidate's log run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest
from serve_fixtures import CANDIDATES, TINY, Server, free_port, make_token, request, solbench, submit, wait_final

from solbench.data.results import read_records

pytestmark = pytest.mark.slow

HOSTILE_LOG = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


BASELINE_FILE = 'BASELINE = "torch"\n\nimport torch\n\n\ndef run(x, y):\n    return torch.add(y, x, alpha=2)\n'


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serve")
    library = tmp / "library"
    shutil.copytree(TINY, library)  # the tiny library, with a library baseline for scaled_add
    (library / "scaled_add" / "solutions").mkdir()
    (library / "scaled_add" / "solutions" / "lib_torch_scaled_add.py").write_text(BASELINE_FILE)
    db = f"sqlite:///{tmp / 'serve.db'}"
    token = make_token(db)
    queued = solbench("serve", "baselines", "tiny.scaled_add", "--db", db, "--problems", str(library), "--workload", "n4")
    assert queued.returncode == 0 and "lib_torch_scaled_add" in queued.stdout, queued.stderr
    shouts = tmp / "shouts_html.py"  # honest, but prints markup into its log
    shouts.write_text(f"import torch\n\nprint({HOSTILE_LOG!r}, flush=True)\n\n\ndef run(x, y):\n"
                      "    return torch.add(y, x, alpha=2)\n")
    fake = tmp / "lib_fake.py"  # a user's file that calls itself a library baseline
    fake.write_text(BASELINE_FILE)
    server = Server(db, free_port(), ("--allow-uploads",), log=tmp / "server.log", problems=library).start()
    ids = {"lib_torch_scaled_add": int(queued.stdout.split()[0].lstrip("#"))}
    for cand in (CANDIDATES / "honest.py", CANDIDATES / "wrong_values.py", shouts, fake):
        status, made = submit(server, token, cand, ["tiny.scaled_add"], workloads=["n4"])
        assert status == 201, made
        ids[cand.stem] = made["id"]
    subs = {name: wait_final(server, i) for name, i in ids.items()}
    yield server, token, subs, tmp, shouts
    server.kill()


def test_unauthenticated_and_bad_tokens_get_401(served):
    server, token, *_ = served
    status, body = submit(server, None, CANDIDATES / "honest.py", ["tiny.scaled_add"])
    assert status == 401 and "no token" in body["error"]
    status, body = submit(server, token[:-2] + "xx", CANDIDATES / "honest.py", ["tiny.scaled_add"])
    assert status == 401 and body["error"] == "unknown or revoked token"


def test_the_statuses_are_those_of_solbench_run(served):
    server, token, subs, tmp, shouts = served
    out = tmp / "run.jsonl"
    proc = solbench("run", str(TINY / "scaled_add"), "--workload", "n4", "--device", "cpu", "--budget", "0.05",
                    "-o", str(out), "-q", "-s", str(CANDIDATES / "honest.py"), "-s", str(CANDIDATES / "wrong_values.py"),
                    "-s", str(shouts))
    assert proc.returncode == 1, proc.stderr[-2000:]
    by_run = {r["solution"]: r["status"] for r in read_records([out])[0]}
    by_service = {}
    for name, sub in subs.items():
        if name.startswith("lib_"):
            continue
        assert sub["state"] == "done", sub
        (rec,) = sub["records"]  # exactly one: one workload, one candidate
        assert (rec["problem"], rec["workload"], rec["solution"]) == ("tiny.scaled_add", "n4", name)
        by_service[name] = rec["status"]
    assert by_service == by_run == {"honest": "PASSED", "wrong_values": "INCORRECT", "shouts_html": "PASSED"}
    wrong = subs["wrong_values"]["records"][0]
    assert "outside atol=1e-05" in wrong["reason"] and wrong["sol"] is None


def test_submit_wait_prints_the_table_of_run(served):
    server, token, *_ = served
    proc = solbench("submit", str(CANDIDATES / "wrong_values.py"), "--problem", "tiny.scaled_add", "--workload", "n4",
                    "--server", server.url, "--token", token, "--wait", "-q", env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 1, proc.stderr  # like run: not every record passed
    assert "tiny.scaled_add (scored against" in proc.stdout and "INCORRECT" in proc.stdout
    assert "0 of 1 passed on cpu" in proc.stdout
    missing = solbench("submit", str(CANDIDATES / "honest.py"), "--problem", "tiny.nope", "--server", server.url,
                       "--token", token)
    assert missing.returncode == 2 and "HTTP 404" in missing.stderr and "Traceback" not in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1


def test_an_uploaded_problem_folder_is_scored_but_kept_off_the_leaderboard(served):
    server, token, *_ = served
    proc = solbench("submit", str(CANDIDATES / "honest.py"), "--problem", str(TINY / "scaled_add"), "--workload",
                    "n4", "--server", server.url, "--token", token, "--wait", "-q")
    assert proc.returncode == 0, proc.stderr
    assert "1 of 1 passed on cpu" in proc.stdout
    board = json.loads(request(server, "GET", "/v1/leaderboard/tiny.scaled_add")[1])
    uploaded = int(proc.stderr.split("#")[1].split()[0])
    assert all(not r["candidate"].startswith(f"#{uploaded} ") for r in board["rows"])


def test_events_stream_the_records_then_the_final_state(served):
    server, _, subs, *_ = served
    status, body, headers = request(server, "GET", f"/v1/submissions/{subs['honest']['id']}/events")
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = [block.split("\n") for block in body.decode().strip().split("\n\n")]
    kinds = [next(line[7:] for line in e if line.startswith("event: ")) for e in events]
    assert kinds[0] == "record" and kinds[-1] == "state"
    record = json.loads(next(line[6:] for line in events[0] if line.startswith("data: ")))
    assert record["status"] == "PASSED" and record["solution"] == "honest"
    assert json.loads(next(line[6:] for line in events[-1] if line.startswith("data: ")))["state"] == "done"


def test_export_writes_the_jsonl_records_of_run(served):
    server, _, subs, tmp, _ = served
    out = tmp / "export.jsonl"
    proc = solbench("serve", "export", "--db", server.db, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    rows, warnings = read_records([out])
    assert not warnings
    assert {r["solution"] for r in rows} >= set(subs)
    assert sum(len(s["records"]) for s in subs.values()) <= len(rows)


def test_leaderboard_json_ranks_each_submission_against_the_library_baseline(served):
    server, _, subs, *_ = served
    board = json.loads(request(server, "GET", "/v1/leaderboard/tiny.scaled_add")[1])
    ranked = {r["candidate"]: r for r in board["rows"]}
    honest = f"#{subs['honest']['id']} honest"
    assert ranked[honest]["workloads_passed"] == 1 and 1 <= ranked[honest]["rank"] <= 4
    wrong = ranked[f"#{subs['wrong_values']['id']} wrong_values"]
    assert wrong["rank"] is None and wrong["INCORRECT"] == 1
    library = subs["lib_torch_scaled_add"]["records"][0]
    # CI, 2026-12-03, once: this record had no SOL (not PASSED); which status and why is what to look at next.
    assert library["status"] == "PASSED", {k: library.get(k) for k in ("status", "reason", "flags", "time_s")}
    library_sol = library["sol"]
    assert ranked["lib_torch_scaled_add"]["baseline"].startswith("torch")  # the library's own, by its name
    assert ranked[honest]["best_known_sol"] == pytest.approx(library_sol)
    assert ranked[honest]["gap_to_best_known"] == pytest.approx(subs["honest"]["records"][0]["sol"] / library_sol)
    fake = ranked[f"#{subs['lib_fake']['id']} lib_fake"]  # a user's claim to be a baseline is not taken
    assert fake["baseline"] == "" and fake["best_known_sol"] == pytest.approx(library_sol)
    best = {b["workload"]: b for b in board["best_per_workload"]}["n4"]
    passed = {n: s["records"][0]["sol"] for n, s in subs.items() if s["records"][0]["status"] == "PASSED"}
    assert best["sol"] == pytest.approx(max(passed.values()))


def _browser() -> str:
    for name in BROWSERS:
        if path := shutil.which(name):
            return path
    message = "headless Chromium not found: install it with `apt-get install -y chromium`"
    if os.environ.get("CI"):
        pytest.fail(message + " (CI is set: this test must run)")
    pytest.skip(message)


def _dom(browser: str, tmp, url: str) -> str:
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
           f"--user-data-dir={tmp / 'profile'}", "--dump-dom", url]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


@pytest.mark.timeout(400)
def test_chromium_renders_the_leaderboard_and_runs_nothing(served, tmp_path):
    from record_factory import HtmlPage

    server, _, subs, *_ = served
    browser = _browser()
    dom = HtmlPage(_dom(browser, tmp_path, f"{server.url}/leaderboard/tiny.scaled_add"))
    tags = [t for t, _ in dom.tags]
    text = " ".join(dom.text)
    assert "script" not in tags
    classes = [a.get("class", "") for t, a in dom.tags if t == "table"]
    assert "leaderboard problem" in classes and "best-per-workload" in classes
    assert "Best known" in text and "lib_torch_scaled_add" in text
    for name in ("honest", "wrong_values", "shouts_html"):
        assert f"#{subs[name]['id']} {name}" in text
    assert "INCORRECT 1" in text  # the failing one's row
    raw = _dom(browser, tmp_path, f"{server.url}/submissions/{subs['shouts_html']['id']}")
    page = HtmlPage(raw)
    assert "script" not in [t for t, _ in page.tags] and "img" not in [t for t, _ in page.tags]
    assert "<script>document.title='pwned'</script>" in "".join(page.text)  # the log, as text
    assert re.search(r"<title>(.*?)</title>", raw).group(1) == f"submission #{subs['shouts_html']['id']}"
