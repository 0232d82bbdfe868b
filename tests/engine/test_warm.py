"""Shapes compiled before a worker's first timing (solbench.engine.warm): which candidates, what is called, when."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

import pytest

import solbench
from solbench.data.problem import load_problem
from solbench.engine.ledger import phase_total
from solbench.engine.pipeline import record_bytes
from solbench.engine.runner import PlanItem, Runner
from solbench.engine.warm import compiles_per_shape, warm_shapes
from solbench.worker import WorkerFailure
from solbench.worker.candidate import describe_candidates

HERE = Path(__file__).resolve().parents[1]
TINY = HERE / "fixtures" / "tiny"
CANDIDATES = HERE / "candidates"
LIBRARY = HERE.parent / "problems"


def test_a_candidate_that_compiles_per_shape_is_known_by_its_source_or_a_file_beside_it(tmp_path):
    eager = tmp_path / "eager" / "torch_eager.py"
    eager.parent.mkdir()
    eager.write_text("import torch\n\ndef run(x):\n    return x * 2\n")
    assert not compiles_per_shape(eager)
    kernel = tmp_path / "kernel" / "triton_add.py"
    kernel.parent.mkdir()
    kernel.write_text("import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x): pass\n")
    assert compiles_per_shape(kernel)
    # torch.compile of a sibling's function: the entry file names it; the eager file beside it still does not
    (tmp_path / "eager" / "torch_compile.py").write_text("import torch\n_f = torch.compile(lambda x: x)\n")
    assert compiles_per_shape(tmp_path / "eager" / "torch_compile.py") and not compiles_per_shape(eager)
    # an entry that loads a file beside it which compiles (load_sibling, or a plain import): that file counts
    loader = tmp_path / "kernel" / "entry.py"
    loader.write_text('import solbench\n_k = solbench.load_sibling(__file__, "triton_add.py")\n')
    assert compiles_per_shape(loader)
    loader.write_text("import triton_add\n")
    assert compiles_per_shape(loader)
    loader.write_text('import torch\nimport solbench\n_e = solbench.load_sibling(__file__, "../eager/torch_compile.py")\n')
    assert not compiles_per_shape(loader)  # a file beside it only
    assert not compiles_per_shape(tmp_path / "missing.py")
    shipped = LIBRARY / "llama3_1_8b" / "rmsnorm" / "solutions"
    assert compiles_per_shape(shipped / "torch_compile.py") and not compiles_per_shape(shipped / "torch_eager.py")


class _Client:
    def __init__(self, fail_on: int | None = None, dies_on: int | None = None):
        self.headers: list[dict] = []
        self.fail_on, self.dies_on = fail_on, dies_on

    def request(self, header, timeout_s, max_bytes, awaiting):
        self.headers.append(header)
        n = len(self.headers)
        if n == self.dies_on:
            raise WorkerFailure("died", "the worker exited with signal 11")
        return {"ok": n != self.fail_on, "outputs": []}


class _Slot:
    def __init__(self, client: _Client):
        self.client, self.gate, self.retired, self.kinds = client, None, 0, []

    def access(self, kind, long=False):
        self.kinds.append((kind, long))
        return nullcontext()

    def retire(self):
        self.retired += 1
        self.client = None


def _inputs_for(problem, skip: set[str], made: list[str], held: list[int]):
    import torch

    @contextmanager
    def inputs(workload):
        if workload.name in skip:
            yield None
            return
        axes = problem.resolve_axes(workload)
        made.append(workload.name)
        held.append(1)
        try:
            yield {"x": torch.zeros(axes["N"], axes["D"]), "y": torch.zeros(axes["N"], axes["D"])}
        finally:
            held.pop()
    return inputs


def test_each_workload_is_called_once_on_its_own_shapes_and_one_that_does_not_fit_is_left_to_its_record():
    problem = load_problem(TINY / "scaled_add")
    client, made, held = _Client(), [], []
    slot = _Slot(client)
    warmed = warm_shapes(slot, problem, problem.workloads, _inputs_for(problem, {"n32"}, made, held), 60.0,
                         threading.Event())
    assert warmed == ["n4", "n131072"] and made == warmed and held == []
    assert [tuple(h["inputs"][0].shape) for h in client.headers] == [(4, 64), (131072, 64)]
    assert all(h["op"] == "call" and h["expect"] == [{"shape": list(h["inputs"][0].shape), "dtype": "float32"}]
               for h in client.headers)
    assert slot.kinds == [("warm", True)] * 2 and slot.retired == 0  # long: it may compile (lockable meanwhile)


@pytest.mark.parametrize("fail_on, dies_on", [(1, None), (None, 1)])
def test_a_call_that_fails_ends_the_warm_up_and_retires_the_worker(fail_on, dies_on):
    problem = load_problem(TINY / "scaled_add")
    client, made, held = _Client(fail_on, dies_on), [], []
    slot = _Slot(client)
    warmed = warm_shapes(slot, problem, problem.workloads, _inputs_for(problem, set(), made, held), 60.0,
                         threading.Event())
    assert warmed == [] and len(client.headers) == 1 and slot.retired == 1 and held == []


def test_a_stopped_run_warms_nothing():
    problem = load_problem(TINY / "scaled_add")
    stop = threading.Event()
    stop.set()
    client = _Client()
    assert warm_shapes(_Slot(client), problem, problem.workloads, _inputs_for(problem, set(), [], []), 60.0,
                       stop) == []
    assert client.headers == []


def test_a_lane_that_warms_calls_every_workload_before_its_first_record(tmp_path, monkeypatch):
    """On a GPU for a candidate that compiles per shape (here forced on the CPU): the lane's worker is loaded
    and called on each workload's inputs, the first one's too (its compile then holds no record's memory), shared
    long requests of its pid, before any record reserves its memory and before any timing window; the first
    record accounts for the time (``warm_s``) and both records pass."""
    options = solbench.RunOptions(device="cpu", budget_s=0.05, seed=5, compile_timeout_s=60, workers_ahead=0,
                                  in_flight=1)
    runner = Runner(options, tmp_path / "r.jsonl")
    lanes: list[str] = []
    monkeypatch.setattr(runner, "_warms", lambda lane: lanes.append(lane.candidate.name) or True)
    made: list[tuple[str, tuple[int, ...]]] = []
    make = runner._make_inputs

    def spy(problem, workload, axes, ledger):
        inputs = make(problem, workload, axes, ledger)
        made.append((workload.name, tuple(inputs["x"].shape)))
        return inputs

    monkeypatch.setattr(runner, "_make_inputs", spy)
    reserved: list[tuple[float, int]] = []  # (when the record's memory was reserved, its bytes)
    acquire = runner.memory.acquire

    def noted(nbytes, *a, **k):
        held = acquire(nbytes, *a, **k)
        reserved.append((time.monotonic(), nbytes))
        return held

    monkeypatch.setattr(runner.memory, "acquire", noted)
    problem = load_problem(TINY / "scaled_add")
    records = runner.run([PlanItem(problem, problem.workloads[:2], describe_candidates([CANDIDATES / "honest.py"]))])
    assert lanes == ["honest"] and made == [("n4", (4, 64)), ("n32", (32, 64))]
    assert [(r.workload, r.status) for r in records] == [("n4", "PASSED"), ("n32", "PASSED")]
    first, second = (r.harness for r in records)
    assert first["warm_s"] > 0 and "warm_s" not in second
    assert phase_total(first) == pytest.approx(first["wall_s"], rel=0.05)
    intervals = runner.gate.intervals
    warm = [i for i in intervals if i.kind == "warm"]
    windows = [i for i in intervals if i.exclusive]
    assert len(warm) == 2 and all(w.pid is not None for w in warm) and windows
    assert max(w.end for w in warm) <= min(w.start for w in windows)
    first_record = min(t for t, nbytes in reserved if nbytes == record_bytes(problem, problem.workloads[0], 3, "cpu"))
    assert max(w.end for w in warm) <= first_record  # the first shape compiled before its record held memory
    assert runner.memory.held == 0  # every reservation given back


def test_a_prepared_lane_loads_its_worker_before_its_first_record_reserves_memory(tmp_path, monkeypatch):
    """On a GPU (here forced on the CPU) a lane that compiles nothing per shape still has its worker up and its
    candidate loaded before its first record's reservation: the start and import hold no record's memory."""
    options = solbench.RunOptions(device="cpu", budget_s=0.05, seed=5, compile_timeout_s=60, workers_ahead=0,
                                  in_flight=1)
    runner = Runner(options, tmp_path / "r.jsonl")
    monkeypatch.setattr(runner, "_warms", lambda lane: False)
    monkeypatch.setattr(runner, "_prepares", lambda warms: True)
    reserved: list[tuple[float, int]] = []
    acquire = runner.memory.acquire

    def noted(nbytes, *a, **k):
        reserved.append((time.monotonic(), nbytes))  # when the reservation was asked for
        return acquire(nbytes, *a, **k)

    monkeypatch.setattr(runner.memory, "acquire", noted)
    problem = load_problem(TINY / "scaled_add")
    records = runner.run([PlanItem(problem, problem.workloads[:2], describe_candidates([CANDIDATES / "honest.py"]))])
    assert [(r.workload, r.status) for r in records] == [("n4", "PASSED"), ("n32", "PASSED")]
    first = records[0].harness
    assert "warm_s" not in first and first["load_s"] > 0
    assert phase_total(first) == pytest.approx(first["wall_s"], rel=0.05)
    load = [i for i in runner.gate.intervals if i.kind == "load"]
    asked = min(t for t, nbytes in reserved if nbytes == record_bytes(problem, problem.workloads[0], 3, "cpu"))
    assert len(load) == 1 and load[0].end <= asked


def test_the_next_lane_is_made_ready_ahead_while_the_lane_before_it_runs(tmp_path, monkeypatch):
    """On a GPU (here forced on the CPU, with a preparation thread) the next lane's worker is loaded and warmed on
    another thread while the lane before it runs its records: the warm-up calls of the second lane's worker end
    before that lane begins, its first record has them as ``prepared_ahead_s`` (no ``warm_s`` or ``load_s`` of its
    own: its phases still add up to its wall), and every record passes."""
    runner = _preparing_runner(tmp_path, monkeypatch)
    begun: dict[str, float] = {}
    first_ledger = runner._first_ledger

    def noted(slot, lane):
        begun[lane.candidate.name] = time.monotonic()
        return first_ledger(slot, lane)

    monkeypatch.setattr(runner, "_first_ledger", noted)
    problem = load_problem(TINY / "scaled_add")
    candidates = describe_candidates([CANDIDATES / "honest.py", CANDIDATES / "noisy.py"])
    records = runner.run([PlanItem(problem, problem.workloads[:2], candidates)])
    assert [(r.solution, r.status) for r in records] == [("honest", "PASSED")] * 2 + [("noisy", "PASSED")] * 2
    first, ahead = records[0].harness, records[2].harness
    assert first["warm_s"] > 0 and "prepared_ahead_s" not in first
    assert ahead["prepared_ahead_s"] > 0 and "warm_s" not in ahead and "load_s" not in ahead
    for harness in (first, ahead):
        assert phase_total(harness) == pytest.approx(harness["wall_s"], rel=0.05)
    pids = {i.pid for i in runner.gate.intervals if i.kind == "warm"}
    assert len(pids) == 2  # each lane's own worker warmed
    second = [i for i in runner.gate.intervals if i.kind == "warm" and i.owner.endswith("/noisy")]
    assert len(second) == 2 and max(i.end for i in second) <= begun["noisy"]
    honest_windows = [i for i in runner.gate.intervals if i.exclusive and i.owner.endswith("/honest")]
    assert min(i.start for i in second) < max(i.end for i in honest_windows)  # while the lane before it ran
    assert runner.memory.held == 0


def test_a_run_that_ends_cancels_the_preparations_ahead_and_stops_their_workers(tmp_path, monkeypatch):
    """Lanes that will not run (the run stopped after its first lane) leave no preparation and no worker: the one
    being made ready ahead is cancelled and its worker stopped, and the run returns."""
    runner = _preparing_runner(tmp_path, monkeypatch)
    emit = runner._emit
    monkeypatch.setattr(runner, "_emit", lambda record, ledger: (emit(record, ledger), runner.stop()))
    problem = load_problem(TINY / "scaled_add")
    candidates = describe_candidates([CANDIDATES / "honest.py", CANDIDATES / "noisy.py"])
    records = runner.run([PlanItem(problem, problem.workloads[:2], candidates)])
    assert [(r.solution, r.workload) for r in records] == [("honest", "n4")]
    assert "honest" not in str(runner._prestarted) and not runner._prestarted
    assert ("scaled_add", str(CANDIDATES / "noisy.py")) not in runner._preparations
    assert runner.memory.held == 0


def _preparing_runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Runner:
    """A CPU run of one lane at a time that prepares as on a GPU (workers loaded and warmed before the first record),
    the next lane's on a preparation thread of its own."""
    from solbench.engine.ahead import Preparations

    options = solbench.RunOptions(device="cpu", budget_s=0.05, seed=5, compile_timeout_s=60, workers_ahead=2,
                                  in_flight=1)
    runner = Runner(options, tmp_path / "r.jsonl")
    runner._preparations = Preparations(1)
    monkeypatch.setattr(runner, "_warms", lambda lane: True)
    monkeypatch.setattr(runner, "_prepares", lambda warms: True)
    return runner


def test_a_lane_whose_preparation_has_not_begun_makes_its_worker_ready_itself(tmp_path, monkeypatch):
    """The preparation thread busy with another (here a stand-in that runs until the run ends): the next lane does
    not wait behind it, it takes its own preparation back and warms its worker on its own thread (``warm_s``)."""
    runner = _preparing_runner(tmp_path, monkeypatch)
    runner._preparations.ask("busy", lambda cancel: cancel.wait(60))
    problem = load_problem(TINY / "scaled_add")
    candidates = describe_candidates([CANDIDATES / "honest.py", CANDIDATES / "noisy.py"])
    began = time.monotonic()
    records = runner.run([PlanItem(problem, problem.workloads[:1], candidates)])
    assert [(r.solution, r.status) for r in records] == [("honest", "PASSED"), ("noisy", "PASSED")]
    second = records[1].harness
    assert second["warm_s"] > 0 and "prepared_ahead_s" not in second and second.get("worker_wait_s", 0.0) < 5
    assert time.monotonic() - began < 50 and "busy" not in runner._preparations


def test_a_warm_up_never_waits_for_memory_so_a_record_waiting_alone_is_not_held_back(tmp_path):
    """The lane holds its worker's own reservation while it warms: a warm-up that does not fit now, or that a record
    waiting to run alone would have to let go first, is skipped at once (None) instead of waiting (H200 call 34: one
    that waited behind a record waiting alone stalled the pass); one that fits is made."""
    from solbench.engine.ledger import Ledger
    from solbench.settings import WARM_COPIES

    options = solbench.RunOptions(device="cpu", budget_s=0.05, seed=5, in_flight=1)
    runner = Runner(options, tmp_path / "r.jsonl")
    problem = load_problem(TINY / "scaled_add")
    workload = problem.workloads[0]
    need = WARM_COPIES * problem.auto_bytes(problem.resolve_axes(workload))
    runner.memory.budget = 3 * need
    lane = runner.memory.acquire(need)  # the lane's own reservation
    try:
        other = runner.memory.acquire(int(1.5 * need))
        began = time.monotonic()
        with runner._warm_inputs(problem, workload, Ledger()) as inputs:
            assert inputs is None and time.monotonic() - began < 1  # does not fit now: skipped, not waited for
        runner.memory.release(other)
        alone = threading.Thread(target=lambda: runner.memory.release(runner.memory.acquire(need, alone=True)))
        alone.start()
        while not runner.memory._alone_waiting:
            time.sleep(0.01)
        with runner._warm_inputs(problem, workload, Ledger()) as inputs:
            assert inputs is None  # a record waits alone for what this lane holds
        runner.memory.release(lane)
        alone.join(5)
        assert not alone.is_alive()
        lane = runner.memory.acquire(need)
        with runner._warm_inputs(problem, workload, Ledger()) as inputs:
            assert inputs is not None and runner.memory.held == 2 * need
    finally:
        runner.memory.release(lane)
        runner.close_hosts()
    assert runner.memory.held == 0
