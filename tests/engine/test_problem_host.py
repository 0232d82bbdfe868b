"""The problem host: a problem folder's own code (cost hook, input generator, reference) runs in a
sandboxed process with a timeout, never in the parent.

Each hostile hook below (exits, raises, hangs, returns garbage, kills its process, starts a process in a
new session, reads or writes outside its folder) gets one line naming the problem file and the hook, a
non-zero exit from the CLI without a traceback, and leaves no process behind. The numbers the host
computes are the ones the same code gives in this process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch

from solbench.data.problem import load_problem
from solbench.engine.cases import prepare_cases
from solbench.engine.problem_code import load_generator, load_reference, workload_cost
from solbench.engine.problem_host import new_host
from solbench.errors import ProblemError
from solbench.guards.sandbox import landlock_abi

ROOT = Path(__file__).resolve().parents[2]
RAGGED = ROOT / "tests" / "fixtures" / "tiny" / "ragged_sum"
SOLUTION = RAGGED / "solutions" / "torch_eager.py"

# Hooks appended to the fixture's reference.py; each problem file names one of them.
HOOKS = '''

def cost_exit(axes, inputs):
    import sys
    sys.exit(0)


def cost_raise(axes, inputs):
    raise ValueError("no cost for you\\n" + "x" * 5_000_000)


def cost_negative(axes, inputs):
    return {"flops": -1, "bytes": 1}


def cost_list(axes, inputs):
    return [1, 2]


def cost_kill(axes, inputs):
    import os
    os._exit(3)


def cost_hang(axes, inputs):
    import time
    time.sleep(3600)


def cost_spawn(axes, inputs):
    import subprocess
    child = subprocess.Popen(["sleep", "600"], start_new_session=True)
    return {"flops": child.pid, "bytes": 1}


def cost_probe(axes, inputs):
    """Bit 0: read a world-readable file outside the folder; 1: read /etc/shadow; 2: wrote outside."""
    import os
    found = 0
    for bit, path in ((1, PROBE_CANARY), (2, "/etc/shadow")):
        try:
            open(path).read()
            found |= bit
        except OSError:
            pass
    try:
        open(PROBE_OUTSIDE, "w").write("planted")
        found |= 4
    except OSError:
        pass
    return {"flops": found, "bytes": 1}
'''


def _hostile(folder: Path, hook: str) -> Path:
    """A copy of the ragged_sum fixture in ``folder`` whose problem file ``<hook>.yaml`` names ``cost_<hook>``."""
    if not (folder / "reference.py").exists():
        shutil.copytree(RAGGED, folder, dirs_exist_ok=True)
        (folder / "reference.py").write_text((RAGGED / "reference.py").read_text() + HOOKS)
    text = (RAGGED / "problem.yaml").read_text()
    if not hook:  # the fixture's own hook
        (folder / "problem.yaml").write_text(text)
        return folder / "problem.yaml"
    text = text.replace("cost: reference.py:cost", f"cost: reference.py:cost_{hook}")
    path = folder / f"{hook}.yaml"
    path.write_text(text.replace("name: tiny.ragged_sum", f"name: tiny.hostile_{hook}"))
    return path


def _cost_error(path: Path, host, timeout_s: float = 60.0) -> str:
    p = load_problem(path)
    host.timeout_s = timeout_s
    with pytest.raises(ProblemError) as err:
        host.workload_cost(p, p.resolve_axes(p.workloads[0]), p.scalars_for(p.workloads[0]))
    (line,) = err.value.errors
    assert str(path) in line and f"cost hook reference.py:cost_{path.stem}" in line, line
    assert "\n" not in line and len(line) < 1000, line[:300]
    return line


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie only waits for init to reap it
    except OSError:
        return True


@pytest.mark.slow
def test_hostile_hooks_each_give_one_line_and_the_host_carries_on(tmp_path):
    """A hook that exits, raises (5 MB of message) or returns garbage: one line each, the same host
    serves the next; one that kills its process or hangs: one line, a fresh host serves the next."""
    folder = tmp_path / "hostile"
    expected = {"exit": "called sys.exit(0)", "raise": "raised ValueError: no cost for you",
                "negative": "flops = -1 is outside [0, 2^63)",
                "list": "must return {'flops': int, 'bytes': int}, got [1, 2]",
                "kill": "ended the problem host (exited with code 3)",
                "hang": "did not finish within 2 s; the problem host was stopped"}
    paths = {hook: _hostile(folder, hook) for hook in expected}
    with new_host().expect([folder]) as host:
        for hook in ("exit", "raise", "negative", "list"):
            assert expected[hook] in _cost_error(paths[hook], host)
        assert host.starts == 1  # failures of the problem's code, not of the host
        assert expected["kill"] in _cost_error(paths["kill"], host)
        start = time.monotonic()
        assert expected["hang"] in _cost_error(paths["hang"], host, timeout_s=2.0)
        assert time.monotonic() - start < 30
        good = load_problem(_hostile(folder, ""))  # the fixture's own hook, next to them
        w = good.workloads[0]
        axes = good.resolve_axes(w)
        assert host.workload_cost(good, axes, good.scalars_for(w)) == workload_cost(good, axes, good.scalars_for(w))
        assert host.starts == 3


@pytest.mark.slow
def test_a_process_the_hook_starts_in_a_new_session_dies_with_the_host(tmp_path):
    path = _hostile(tmp_path / "spawn", "spawn")
    p = load_problem(path)
    with new_host() as host:
        pid = host.workload_cost(p, p.resolve_axes(p.workloads[0]), {}).flops
        assert not _gone(pid)  # it ran, outside the host's process group
        assert os.getsid(pid) != os.getsid(host.client.proc.pid)
    deadline = time.monotonic() + 10
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(pid)


@pytest.mark.slow
@pytest.mark.skipif(landlock_abi() < 1, reason="the kernel has no Landlock")
def test_the_hook_cannot_read_or_write_outside_its_folder(tmp_path):
    """World-readable canary in a world-readable folder, a world-writable folder: only the sandbox stops
    the hook (and /etc/shadow, which the sandbox user could not read anyway)."""
    outside = Path(tempfile.mkdtemp(prefix="solbench-probe-"))
    try:
        outside.chmod(0o777)
        canary = outside / "canary"
        canary.write_text("CANARY")
        canary.chmod(0o644)
        path = _hostile(tmp_path / "probe", "probe")
        ref = path.parent / "reference.py"
        ref.write_text(ref.read_text().replace("PROBE_CANARY", repr(str(canary)))
                       .replace("PROBE_OUTSIDE", repr(str(outside / "planted"))))
        p = load_problem(path)
        with new_host() as host:
            found = host.workload_cost(p, p.resolve_axes(p.workloads[0]), {}).flops
            assert host.client.sandbox["files"].startswith("landlock")
        assert found == 0, f"the hook got through: {found:03b}"
        assert not (outside / "planted").exists()
    finally:
        shutil.rmtree(outside)


@pytest.mark.slow
def test_hosted_cases_equal_the_cases_made_in_process():
    """The generator (seeded from the case's seed) and the reference in the host give the same inputs and
    outputs as the same code run here."""
    p = load_problem(RAGGED)
    w = p.workload("b8")
    here = prepare_cases(p, w, base_seed=7, device="cpu", rounds=3, ref_fn=load_reference(p), gen_fn=load_generator(p))
    with new_host() as host:
        ref_fn, gen_fn = host.functions(p)
        there = prepare_cases(p, w, base_seed=7, device="cpu", rounds=3, ref_fn=ref_fn, gen_fn=gen_fn)
    assert len(here.rounds) == len(there.rounds) and len(here.sets) == len(there.sets)
    for a, b in zip(here.rounds + here.sets, there.rounds + there.sets, strict=True):
        for name in ("x", "indptr"):
            assert torch.equal(a.inputs[name], b.inputs[name])
        assert torch.equal(a.expected["out"], b.expected["out"])


def test_a_records_cases_and_references_go_to_the_host_in_few_requests_and_equal_one_at_a_time(monkeypatch):
    """Rounds and timing sets each in one request, several calls' references in one: the same inputs and
    outputs as the code run here, call by call."""
    from solbench.engine import problem_host
    from solbench.engine.cases import reference_outputs_many

    ops = []
    real = problem_host.ProblemHost.request

    def counted(self, problem, what, header, reply_bytes=0):
        ops.append(header["op"])
        return real(self, problem, what, header, reply_bytes)

    monkeypatch.setattr(problem_host.ProblemHost, "request", counted)
    p = load_problem(RAGGED)
    w = p.workload("b8")
    axes = p.resolve_axes(w)
    here = prepare_cases(p, w, base_seed=7, device="cpu", rounds=3, ref_fn=load_reference(p), gen_fn=load_generator(p))
    with new_host() as host:
        ref_fn, gen_fn = host.functions(p)
        there = prepare_cases(p, w, base_seed=7, device="cpu", rounds=3, ref_fn=ref_fn, gen_fn=gen_fn)
        assert ops == ["cases", "cases"] and len(there.sets) >= 2
        again = reference_outputs_many(p, axes, ref_fn, [c.inputs for c in here.rounds + here.sets])
    assert ops == ["cases", "cases", "references"]
    made = here.rounds + here.sets
    for a, b, ref in zip(made, there.rounds + there.sets, again, strict=True):
        assert a.seed == b.seed and all(torch.equal(a.inputs[n], b.inputs[n]) for n in ("x", "indptr"))
        assert torch.equal(a.expected["out"], b.expected["out"]) and torch.equal(a.expected["out"], ref["out"])


def test_a_batch_of_calls_is_cut_to_the_bytes_one_request_may_carry(monkeypatch):
    """Past ``BATCH_BYTES`` the calls go in several requests, each within it (one call each past it)."""
    from solbench.engine import cases as cases_module

    p = load_problem(RAGGED)
    axes = p.resolve_axes(p.workload("b8"))
    sizes = []
    host = type("Host", (), {})()
    ref_fn = problem_host_reference(p, host, sizes)
    monkeypatch.setattr(cases_module, "BATCH_BYTES", 2 * p.auto_bytes(axes) + 1)
    inputs = [prepare_cases(p, p.workload("b8"), base_seed=s, device="cpu", rounds=1, ref_fn=load_reference(p),
                            gen_fn=load_generator(p)).rounds[0].inputs for s in range(5)]
    outs = cases_module.reference_outputs_many(p, axes, ref_fn, inputs)
    assert sizes == [2, 2, 1] and len(outs) == 5
    monkeypatch.setattr(cases_module, "BATCH_BYTES", 1)
    sizes.clear()
    cases_module.reference_outputs_many(p, axes, ref_fn, inputs[:3])
    assert sizes == [1, 1, 1]


def problem_host_reference(problem, host, sizes):
    """A HostedReference whose host runs the reference here, noting each request's number of calls."""
    from solbench.engine.problem_host import HostedReference

    reference = load_reference(problem)

    def references(_problem, _axes, calls, _device):
        sizes.append(len(calls))
        return [list(_as_tuple(reference(*[a.clone() if hasattr(a, "clone") else a for a in args]))) for args in calls]

    host.references = references
    return HostedReference(host, problem)


def _as_tuple(result):
    return (result,) if isinstance(result, torch.Tensor) else tuple(result)


def _solbench(*args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "solbench", *args], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, COLUMNS="200", **env), timeout=timeout)


def _one_line(done: subprocess.CompletedProcess, *parts: str) -> None:
    assert done.returncode != 0, done.stdout[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    text = " ".join(done.stderr.split())  # the console may wrap a long line
    assert all(part in text for part in parts), done.stderr[-3000:]


@pytest.mark.slow
def test_run_with_a_hook_that_exits_zero_fails_with_a_line(tmp_path):
    """Before the host, ``sys.exit(0)`` in a cost hook ended ``solbench run`` with exit code 0 and no record."""
    folder = tmp_path / "exit"
    path = _hostile(folder, "exit")
    path.rename(folder / "problem.yaml")
    out = tmp_path / "r.jsonl"
    done = _solbench("run", str(folder), "-s", str(SOLUTION), "--device", "cpu", "--workload", "b4", "--budget", "0.05",
                     "-o", str(out))
    _one_line(done, str(folder / "problem.yaml"), "cost hook reference.py:cost_exit called sys.exit(0)")


@pytest.mark.slow
def test_list_sol_and_validate_with_hostile_hooks(tmp_path):
    """``list --problems DIR`` with a hook that hangs: the timeout's line; ``validate --deep`` with one
    that exits 0: its line, exit 1; ``sol`` with one that starts a process in a new session: the process
    is gone when the command is."""
    hang = tmp_path / "lib" / "hang"
    _hostile(hang, "hang").rename(hang / "problem.yaml")
    done = _solbench("list", "--problems", str(tmp_path / "lib"), SOLBENCH_PROBLEM_TIMEOUT_S="3")
    _one_line(done, str(hang / "problem.yaml"), "cost hook reference.py:cost_hang did not finish within 3 s")
    exits = tmp_path / "exit"
    _hostile(exits, "exit").rename(exits / "problem.yaml")
    done = _solbench("validate", "--deep", str(exits))
    _one_line(done, str(exits / "problem.yaml"), "reference.py:cost_exit", "called sys.exit(0)")
    spawn = tmp_path / "spawn"
    _hostile(spawn, "spawn").rename(spawn / "problem.yaml")
    done = _solbench("sol", str(spawn), "--gpu", "h200_sxm", "--workload", "b4", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    pid = json.loads(done.stdout)[0]["flops"]
    deadline = time.monotonic() + 10
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(pid)


def test_a_request_waiting_for_a_busy_host_steps_out_of_the_callers_gate_hold(monkeypatch):
    """The host serves one request at a time; a caller that finds it busy waits stepped out (the
    run's gate let go), and one that finds it free does not step out at all."""
    import threading
    from contextlib import contextmanager

    host = new_host("cpu")
    stepped: list[str] = []

    @contextmanager
    def step_out():
        stepped.append("out")
        yield
        stepped.append("back")

    class FakeClient:
        def request(self, header, timeout_s, reply_bytes, awaiting=None):
            return {"ok": True, "op": header["op"]}

    host.step_out = step_out
    monkeypatch.setattr(host, "_client", lambda problem: FakeClient())
    problem = load_problem(Path(__file__).parents[1] / "fixtures" / "tiny" / "scaled_add")
    assert host.request(problem, "x", {"op": "free"})["op"] == "free"
    assert stepped == []  # free: no step out
    busy = threading.Event()
    release = threading.Event()

    def other_lane():
        with host._lock:
            busy.set()
            release.wait(2.0)

    t = threading.Thread(target=other_lane)
    t.start()
    busy.wait(2.0)
    threading.Timer(0.1, release.set).start()
    assert host.request(problem, "x", {"op": "busy"})["op"] == "busy"
    t.join()
    assert stepped == ["out", "back"]


def test_a_hosts_reply_is_awaited_in_the_callers_awaiting_hook_with_the_hosts_pid(monkeypatch):
    """While the caller only awaits the host's reply, the run's gate may lock the host: the hook is entered with
    the host process's pid around the wait, and left before the reply is read."""
    from contextlib import contextmanager
    from types import SimpleNamespace

    host, seen = new_host("cpu"), []

    @contextmanager
    def awaiting(pid):
        seen.append(("in", pid))
        yield
        seen.append(("out", pid))

    class FakeClient:
        proc = SimpleNamespace(pid=4242)

        def request(self, header, timeout_s, reply_bytes, awaiting=None):
            with awaiting():
                seen.append(("waiting", None))
            seen.append(("read", None))
            return {"ok": True, "op": header["op"]}

    host.awaiting = awaiting
    monkeypatch.setattr(host, "_client", lambda problem: FakeClient())
    problem = load_problem(Path(__file__).parents[1] / "fixtures" / "tiny" / "scaled_add")
    assert host.request(problem, "x", {"op": "free"})["op"] == "free"
    assert seen == [("in", 4242), ("waiting", None), ("out", 4242), ("read", None)]


def test_a_layer_problem_run_on_its_own_reads_its_sibling_ops_references():
    """llama3_1_8b.decoder_layer chains its ops' references from sibling folders: a host started for it
    alone may read its model's folder (it was denied them: PermissionError), and nothing above it."""
    from solbench.engine.problem_host import host_reads

    folder = ROOT / "problems" / "llama3_1_8b" / "decoder_layer"
    assert host_reads({str(folder)}) == (str(folder.parent), str(folder))
    problem = load_problem(folder)
    with new_host("cpu") as host:
        host.expect([folder])
        axes = problem.test_axes_resolved()
        inputs, outputs = host.case(problem, axes, 7, "cpu", {})
    assert set(inputs) == set(problem.inputs) and len(outputs) == len(problem.outputs)
    assert all(torch.isfinite(o.float()).all() for o in outputs)


def test_a_hosts_case_and_reference_travel_by_the_device_pool_and_equal_the_code_run_here(simulated_pool, monkeypatch):
    """The device route (a pool shared with the host alone; host memory stands in for the device's):
    the host's serve loop reads the reference's inputs as views of the pool and writes the outputs into
    its reply area; no tensor goes through a memfd either way, and the values are the reference's."""
    from solbench.worker import wire

    def no_memfd(*a, **k):
        raise AssertionError("a tensor went by memfd")

    monkeypatch.setattr(wire, "_shm_read", no_memfd)
    monkeypatch.setattr(wire, "_shm_write", no_memfd)
    p = load_problem(RAGGED)
    axes = p.resolve_axes(p.workload("b8"))
    here_inputs = {k: v for k, v in prepare_cases(p, p.workload("b8"), base_seed=7, device="cpu", rounds=1,
                                                  ref_fn=load_reference(p), gen_fn=load_generator(p)).rounds[0]
                   .inputs.items()}
    expected = load_reference(p)(*[v.clone() if hasattr(v, "clone") else v for v in here_inputs.values()])
    reply = _served_by_pool(p, {"op": "reference", "axes": axes, "args": list(here_inputs.values()), "device": "cpu"})
    (out,) = reply["outputs"]
    assert torch.equal(out, expected if isinstance(expected, torch.Tensor) else expected[0])


def test_several_calls_references_travel_by_the_device_pool_in_one_request(simulated_pool, monkeypatch):
    """The batched request on the device route: each call's inputs are views of the pool, each call's outputs
    come back in the reply area, in order, as the reference gives them call by call."""
    from solbench.worker import wire

    monkeypatch.setattr(wire, "_shm_read", lambda *a, **k: pytest.fail("a tensor went by memfd"))
    monkeypatch.setattr(wire, "_shm_write", lambda *a, **k: pytest.fail("a tensor went by memfd"))
    p = load_problem(RAGGED)
    w = p.workload("b8")
    made = prepare_cases(p, w, base_seed=3, device="cpu", rounds=3, ref_fn=load_reference(p), gen_fn=load_generator(p))
    calls = [list(c.inputs.values()) for c in made.rounds]
    reply = _served_by_pool(p, {"op": "references", "axes": p.resolve_axes(w), "calls": calls, "device": "cpu"})
    assert [torch.equal(out, c.expected["out"]) for (out,), c in zip(reply["outputs"], made.rounds, strict=True)] \
        == [True] * 3


def _served_by_pool(problem, message: dict) -> dict:
    """One request to a host's serve loop on a thread, by the device route (a ParentPool); its reply."""
    import socket
    import threading

    from solbench.engine import problem_host
    from solbench.worker import devwire, wire

    parent = devwire.ParentPool(0, shrink=True)
    a, b = socket.socketpair()
    server = threading.Thread(target=problem_host.serve, args=(b, {}), daemon=True)
    server.start()
    with a, b:
        assert wire.recv_message(a, time.monotonic() + 10)["op"] == "hello"
        parent.send(a, {**message, "problem": problem_host._problem_message(problem), "reply_room": 1 << 16},
                    time.monotonic() + 30)
        reply = wire.recv_message(a, time.monotonic() + 30, 1 << 20, device=parent)
        assert reply["ok"] is True, reply
        wire.send_message(a, {"op": "exit"}, time.monotonic() + 5)
        server.join(10)
        assert not server.is_alive()
    return reply


def test_a_hosts_device_pool_is_made_again_smaller_for_far_smaller_requests(monkeypatch):
    """A host's pool sized for one large workload is not kept for the small ones after it (the memory
    is the records' beside it); a worker's pool is kept (its burst's room is made ahead)."""
    from solbench.worker import devwire, vmm

    made: list[int] = []

    class Mapping:
        def __init__(self, size: int):
            self.size = size

        def tensor(self, offset: int = 0, nbytes: int | None = None):
            return torch.empty(nbytes or 0, dtype=torch.uint8)

        def close(self) -> None:
            pass

    def create(nbytes: int, device: int):
        made.append(nbytes)
        return Mapping(nbytes), os.open(os.devnull, os.O_RDONLY)

    monkeypatch.setattr(vmm, "create", create)
    big, small = 1 << 30, 1 << 20
    for shrink, expected in ((True, [big, small]), (False, [big])):
        made.clear()
        pool = devwire.ParentPool(0, shrink=shrink)
        for need in (big, small, small // 2):
            fd = pool._room(need)
            if fd is not None:
                os.close(fd)
        assert made == expected, (shrink, made)


@pytest.mark.slow
def test_a_host_that_cannot_map_the_device_pool_serves_the_request_by_memfd_from_then_on(monkeypatch):
    """A host offered a device pool it cannot map says so; the parent sends that request again by memfd
    (and every later one): the case arrives whole, equal to the one made here."""
    from solbench.worker import devwire
    from solbench.worker.wire import _LEN, _sendall

    def unmappable(self, sock, header, deadline):  # a pool the host cannot map (no such chunk)
        data = json.dumps({**header, "tensors": [], "wire": "cuda", "pool": {"chunk": 99}}).encode()
        _sendall(sock, _LEN.pack(len(data)) + data, deadline)

    monkeypatch.setattr(devwire.ParentPool, "send", unmappable)
    monkeypatch.setattr(devwire, "device_index", lambda device: 0)
    p = load_problem(RAGGED)
    w = p.workload("b8")
    here = prepare_cases(p, w, base_seed=7, device="cpu", rounds=1, ref_fn=load_reference(p), gen_fn=load_generator(p))
    with new_host("cpu", transport="device") as host:
        ref_fn, gen_fn = host.functions(p)
        there = prepare_cases(p, w, base_seed=7, device="cpu", rounds=1, ref_fn=ref_fn, gen_fn=gen_fn)
        assert host.client.transport == "memfd" and "could not map the shared device pool" in host.client.transport_note
    for a, b in zip(here.rounds + here.sets, there.rounds + there.sets, strict=True):
        assert torch.equal(a.inputs["x"], b.inputs["x"]) and torch.equal(a.expected["out"], b.expected["out"])
