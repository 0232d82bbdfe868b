"""The service's throughput check: start `solbench serve` on a fresh SQLite file, queue N submissions at
once through N `solbench submit --wait` clients, wait for every one, and write the wall time, the
records per minute and each submission's queue, start and end times as JSON.

    python3 scripts/serve_throughput.py -o results/h200/serve_2026-12-02.json --device cuda -n 20

By default each submission is a library problem's shipped torch_eager.py at its small workload
(``--small``): the check measures the service (queue, job processes, workers), not a kernel.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _solbench(*args: str) -> list[str]:
    return [sys.executable, "-m", "solbench", *args]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


def _wait_up(url: str, proc: subprocess.Popen, timeout: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with code {proc.returncode}")
        try:
            urllib.request.urlopen(url + "/", timeout=5).read()
            return time.monotonic() - t0
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"the server did not answer within {timeout} s")


def _candidate(problem: str, name: str) -> Path:
    """The problem's shipped candidate ``name`` (library folder <family>/<op>/solutions/)."""
    family, op = problem.split(".", 1)
    path = ROOT / "problems" / family / op / "solutions" / name
    if not path.is_file():
        raise SystemExit(f"{path} not found: pick --problem and --candidate of the shipped library")
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", required=True, type=Path)
    ap.add_argument("-n", type=int, default=20, help="submissions queued at once")
    ap.add_argument("--problem", action="append", help="library problem (repeatable: submissions cycle through)")
    ap.add_argument("--candidate", default="torch_eager.py", help="shipped candidate file of each problem")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--budget", default="0.2", help="timing budget per workload, seconds")
    ap.add_argument("--batch", default="8", help="submissions one job process takes")
    ap.add_argument("--timeout", type=float, default=170, help="seconds to wait for all, after the server is up")
    args = ap.parse_args()
    problems = args.problem or ["llama3_1_8b.rmsnorm", "llama3_1_8b.swiglu"]
    cands = [_candidate(p, args.candidate) for p in problems]
    tmp = Path(tempfile.mkdtemp(prefix="solbench-serve-check-"))
    db = f"sqlite:///{tmp / 'serve.db'}"
    token = subprocess.run(_solbench("serve", "token", "add", "check", "--db", db, "--max-pending", str(args.n)),
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(tmp / "server.log", "wb")  # noqa: SIM115 - the server keeps it
    server = subprocess.Popen(_solbench("serve", "--db", db, "--port", str(port), "--device", args.device,
                                        "--budget", args.budget, "--batch", args.batch), cwd=ROOT, stdout=log,
                              stderr=subprocess.STDOUT)
    try:
        up_s = _wait_up(url, server, 120)
        t0 = time.monotonic()
        clients = [subprocess.Popen(_solbench("submit", str(cands[i % len(cands)]), "--problem",
                                              problems[i % len(problems)], "--small", "--wait", "-q", "--server", url,
                                              "--token", token), cwd=ROOT, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True) for i in range(args.n)]
        outs = [_finish(c, t0 + args.timeout) for c in clients]
        wall_s = time.monotonic() - t0
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
    ids = [int(err.split("#", 1)[1].split()[0]) for _, err in outs if "#" in err]
    subs = _subs(db, ids)
    records = [r for s in subs for r in s["records"]]
    result = {
        "what": "solbench serve: N submissions queued at once through `solbench submit --wait`, all scored",
        "submissions": args.n, "accepted": len(ids), "problems": problems, "candidate": args.candidate,
        "device": args.device, "budget_s": float(args.budget), "batch": int(args.batch),
        "server_start_s": round(up_s, 2), "wall_s": round(wall_s, 2), "records": len(records),
        "records_per_minute": round(len(records) / wall_s * 60, 2) if wall_s else None,
        "states": dict(Counter(s["state"] for s in subs)), "statuses": dict(Counter(r["status"] for r in records)),
        "client_exit_codes": dict(Counter(str(c.returncode) for c in clients)),
        "per_submission": [{"id": s["id"], "state": s["state"], "queued_s": _span(s, "created_at", "started_at"),
                            "run_s": _span(s, "started_at", "finished_at"), "attempts": s["attempts"],
                            "records": len(s["records"])} for s in subs],
        "gpu": next((r.get("device") for r in records), None),
        "solbench_commit": _commit(),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("accepted", "wall_s", "records", "records_per_minute", "states",
                                             "statuses")}))
    return 0 if result["states"] == {"done": args.n} else 1


def _finish(client: subprocess.Popen, deadline: float) -> tuple[str, str]:
    """A client's output; one still waiting at the deadline is stopped (its submission stays queued)."""
    try:
        return client.communicate(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        client.kill()
        return client.communicate()


def _subs(db: str, ids: list[int]) -> list[dict]:
    """Each submission's row and records, from the database the server left (no server needed)."""
    sys.path.insert(0, str(ROOT))
    from solbench.serve.store import Store

    store = Store(db)
    return [{**store.submission(i), "records": store.records(i)} for i in ids]


def _span(sub: dict, start: str, end: str) -> float | None:
    return round(sub[end] - sub[start], 2) if sub.get(start) and sub.get(end) else None


def _commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip() or None
    except OSError:
        return None


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
