"""Guards (solbench.guards): findings, output objects, fingerprints, memoization probe, the review hook.

Every check is compared with what is known independently: objects built to be (or not be) what the
guard looks for, tensors changed by hand, timings of functions whose cost is known.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from solbench.data.problem import load_problem
from solbench.data.record import Status
from solbench.engine.scoring import Evaluation
from solbench.guards import (
    INCORRECT,
    REWARD_HACK,
    Finding,
    check_output_objects,
    check_output_stability,
    compare_fingerprints,
    input_fingerprints,
    memoization_probe,
    review,
    worst,
)
from solbench.guards.fingerprints import _device_digest
from solbench.guards.memo import fresh_copy

ROOT = Path(__file__).resolve().parents[2]


def _args(t: int = 4, h: int = 8) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randn(t, h, generator=g), torch.randn(h, h, generator=g), torch.randn(t, h, generator=g)]


# --- findings and the physics floor ------------------------------------------------------------

def test_finding_reason_is_one_line_and_status_is_checked() -> None:
    f = Finding("k", REWARD_HACK, "line one\nline   two")
    assert f.reason == "line one line two"
    with pytest.raises(ValueError):
        Finding("k", "PASSED", "x")  # type: ignore[arg-type]


def test_finding_round_trips_and_rejects_malformed_dicts() -> None:
    f = Finding("alias", INCORRECT, "why", {"output": 0, "input": 2})
    back = Finding.from_dict(f.as_dict())
    assert back == f and back is not None and back.details == {"output": 0, "input": 2}
    for bad in ({}, {"kind": "k", "status": "PASSED", "reason": "r"}, {"kind": 1, "status": INCORRECT, "reason": "r"}):
        assert Finding.from_dict(bad) is None


def test_worst_prefers_reward_hack_then_the_first() -> None:
    a, b, c = Finding("a", INCORRECT, "a"), Finding("b", REWARD_HACK, "b"), Finding("c", REWARD_HACK, "c")
    assert worst([a, b, c]) is b
    assert worst([a]) is a
    assert worst([]) is None


# --- output objects ----------------------------------------------------------------------------

class _Subclass(torch.Tensor):
    pass


class _Proxy:
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN206
        return NotImplemented


def _kinds(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.kind, f.status) for f in findings]


def test_plain_fresh_outputs_pass() -> None:
    args = _args()
    out = torch.addmm(args[2], args[0], args[1].t())
    assert check_output_objects(out, args) == []
    assert check_output_objects((out, out.clone()), args) == []
    buf = torch.empty(3 * 4 * 8)
    view = buf[8:8 + 32].view(4, 8)  # a view of a fresh buffer is an output of its own
    assert check_output_objects(view, args) == []
    assert check_output_objects(buf[:32].view(8, 4).t(), args) == []


@pytest.mark.parametrize(("make", "kind", "status"), [
    (lambda a: a[2].clone().as_subclass(_Subclass), "output_subclass", REWARD_HACK),
    (lambda a: _Proxy(), "output_proxy", REWARD_HACK),
    (lambda a: None, "output_type", INCORRECT),
    (lambda a: a[2].numpy(), "output_type", INCORRECT),
    (lambda a: [a[2].clone()][0].to_sparse(), "output_layout", INCORRECT),
    (lambda a: torch.empty(4, 8, device="meta"), "output_no_storage", REWARD_HACK),
    (lambda a: torch._efficientzerotensor(4, 8), "output_no_storage", REWARD_HACK),
])
def test_bad_output_objects(make, kind: str, status: str) -> None:  # noqa: ANN001
    args = _args()
    assert _kinds(check_output_objects(make(args), args)) == [(kind, status)]


def test_instance_attribute_shadowing_a_tensor_method_is_a_hack() -> None:
    args = _args()
    out = torch.empty(4, 8)
    out.detach = lambda: torch.ones(4, 8)
    found = check_output_objects(out, args)
    assert _kinds(found) == [("output_overridden", REWARD_HACK)] and "detach" in found[0].reason
    harmless = torch.empty(4, 8)
    harmless.note = "a tag"  # an attribute that shadows nothing
    assert check_output_objects(harmless, args) == []


def test_container_subclasses_are_not_iterated() -> None:
    class Sneaky(tuple):
        def __iter__(self):  # noqa: ANN204
            raise AssertionError("the guard must not run candidate code")

    args = _args()
    assert _kinds(check_output_objects(Sneaky((args[2].clone(),)), args)) == [("output_type", INCORRECT)]


def test_aliasing_an_input_is_incorrect_unless_declared_in_place() -> None:
    args = _args()
    for out in (args[2], args[2][1:], args[0].view(-1)):
        found = check_output_objects(out, args, output_names=["out"], input_names=["attn", "weight", "residual"])
        assert _kinds(found) == [("output_aliases_input", INCORRECT)]
    found = check_output_objects(args[2], args, output_names=["out"], input_names=["attn", "weight", "residual"])
    assert found[0].details == {"output": 0, "input": 2} and "'residual'" in found[0].reason
    allowed = check_output_objects({"out": args[2]}, {"attn": args[0], "weight": args[1], "residual": args[2]},
                                   inplace_of={"out": "residual"})
    assert allowed == []


def test_wrapper_tensor_inside_vmap_has_no_storage() -> None:
    seen: list[list[Finding]] = []

    def body(x: torch.Tensor) -> torch.Tensor:
        seen.append(check_output_objects(x, []))
        return x

    torch.func.vmap(body)(torch.ones(2, 3))
    assert _kinds(seen[0]) == [("output_no_storage", REWARD_HACK)]


# --- fingerprints ------------------------------------------------------------------------------

def test_fingerprints_see_any_changed_element_and_nothing_else() -> None:
    args = _args()
    names = ["attn", "weight", "residual"]
    before = input_fingerprints(args, names)
    assert compare_fingerprints(before, input_fingerprints(args, names)) == []
    args[2][3, 7] += 1e-3
    found = compare_fingerprints(before, input_fingerprints(args, names))
    assert _kinds(found) == [("input_mutation", INCORRECT)] and "'residual'" in found[0].reason
    assert compare_fingerprints(before, input_fingerprints(args, names), allowed={"residual"}) == []


def test_fingerprints_see_a_storage_swap() -> None:
    args = _args()
    before = input_fingerprints(args)
    args[0].set_(args[0].clone())  # same values, another storage
    found = compare_fingerprints(before, input_fingerprints(args))
    assert len(found) == 1 and "storage" in found[0].reason


def test_fingerprints_of_bfloat16_bool_and_empty_tensors() -> None:
    values = {"b": torch.randn(5, 3).bfloat16(), "m": torch.rand(7) > 0.5, "e": torch.empty(0, 4), "s": 3.0}
    before = input_fingerprints(values)
    assert set(before) == {"b", "m", "e"}  # Python scalars are immutable: not fingerprinted
    values["m"][0] = ~values["m"][0]
    assert [f.reason.split("'")[1] for f in compare_fingerprints(before, input_fingerprints(values))] == ["m"]


def test_device_checksum_sees_a_swap_of_two_elements() -> None:
    # The plain sum cannot see a permutation; the position-weighted sum must.
    x = torch.arange(1000, dtype=torch.float32)
    y = x.clone()
    y[[10, 500]] = y[[500, 10]]
    assert _device_digest(x) != _device_digest(y)
    assert _device_digest(x) == _device_digest(x.clone())
    odd = torch.arange(7, dtype=torch.uint8)  # bytes not a multiple of 4
    odd2 = odd.clone()
    odd2[6] = 0
    assert _device_digest(odd) != _device_digest(odd2)


def test_output_stability_sees_a_late_writer() -> None:
    out = torch.zeros(16)
    assert check_output_stability(out, "cpu", settle_s=0.001) == []

    def late() -> None:
        time.sleep(0.01)
        out.fill_(1.0)

    thread = threading.Thread(target=late)
    thread.start()
    found = check_output_stability(out, "cpu", settle_s=0.2)
    thread.join()
    assert _kinds(found) == [("output_changed_after_return", REWARD_HACK)]


# --- memoization probe -------------------------------------------------------------------------

def _matmul_inputs(n: int = 192) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return [torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)]


def _median_time(fn, args: list[torch.Tensor], n: int = 15) -> float:  # noqa: ANN001
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return sorted(times)[n // 2]


def _honest(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = a
    for _ in range(4):  # a few ms of real work whatever the values
        out = torch.tanh(out @ b)
    return out


def test_memoization_probe_passes_honest_code_and_flags_a_cache() -> None:
    args = _matmul_inputs()
    assert memoization_probe(_honest, args, _median_time(_honest, args)) is None

    cache: dict[tuple[int, ...], torch.Tensor] = {}

    def memoized(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        key = (a.data_ptr(), b.data_ptr())
        if key not in cache:
            cache[key] = _honest(a, b)
        return cache[key]

    found = memoization_probe(memoized, args, _median_time(memoized, args))
    assert found is not None and found.kind == "memoization" and found.status == REWARD_HACK


def test_memoization_probe_of_a_long_call_makes_one_pair_a_round_and_still_flags_a_cache() -> None:
    """Where a call takes longer than a round's time, a round is one repeat call and one fresh call: an honest
    candidate is called twice, a cache is still lopsided in every round (and called twice per round)."""
    from solbench.guards.memo import PROBE_ROUND_S, ROUNDS

    args = _matmul_inputs()
    calls = {"n": 0}
    cache: dict[tuple[int, ...], torch.Tensor] = {}

    def counted(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        calls["n"] += 1
        return _honest(a, b)

    def memoized(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        key = (a.data_ptr(), b.data_ptr())
        if key not in cache:
            cache[key] = counted(a, b)
        calls["n"] += 1
        return cache[key]

    long_median = 2 * PROBE_ROUND_S
    assert memoization_probe(counted, args, long_median) is None and calls["n"] == 2
    calls["n"] = 0
    memoized(*args)  # the timed set, seen before the probe
    calls["n"] = 0
    found = memoization_probe(memoized, args, long_median)
    assert found is not None and found.status == REWARD_HACK
    assert calls["n"] == 2 * 2 * ROUNDS - ROUNDS  # per round: the repeat (a hit) and the fresh call (a miss, counted twice)


def test_memoization_probe_passes_a_tiny_honest_lookup_into_a_big_table() -> None:
    """A 1-row gather from an 8 MB table: microseconds back to back, about 0.1 ms right after
    milliseconds of copying on a CPU. The fresh calls follow their copies; the repeat calls must
    meet the same machine, or the gap reads as a 10-20x memoization speed-up (seen on embedding)."""
    g = torch.Generator().manual_seed(2)
    args = [torch.randint(0, 1024, (1,), generator=g), torch.randn(1024, 4096, generator=g).to(torch.bfloat16)]
    gather = torch.nn.functional.embedding
    _median_time(gather, args)  # warm
    assert memoization_probe(gather, args, _median_time(gather, args, n=51)) is None


def test_memoization_probe_ignores_a_crashing_probe() -> None:
    calls = {"n": 0}

    def fragile(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        calls["n"] += 1
        if calls["n"] > 1:
            raise RuntimeError("only once")
        return a

    assert memoization_probe(fragile, _matmul_inputs(8), 1e-6) is None


def test_fresh_copy_changes_floats_and_addresses_but_not_integers() -> None:
    values = [torch.randn(64), torch.arange(10), 2.5]
    copy = fresh_copy(values, torch.Generator().manual_seed(0))
    assert copy[0].data_ptr() != values[0].data_ptr() and not torch.equal(copy[0], values[0])
    assert torch.allclose(copy[0], values[0], rtol=0.1, atol=0)
    assert torch.equal(copy[1], values[1]) and copy[1].data_ptr() != values[1].data_ptr()
    assert copy[2] == 2.5


# --- the parent's review -------------------------------------------------------------------------

def _review(status: Status, findings: list[dict], problem_dir: str = "problems/llama3_1_8b/attn_o_proj_residual"):
    ev = Evaluation(status, "earlier reason" if status != Status.PASSED else None, "done", findings=findings)
    return review(ev, SimpleNamespace(problem=load_problem(ROOT / problem_dir)))


def test_review_applies_findings_by_rank() -> None:
    hack = Finding("thread", REWARD_HACK, "left a thread").as_dict()
    wrong = Finding("output_type", INCORRECT, "not a tensor").as_dict()
    ev = _review(Status.PASSED, [wrong, hack])
    assert (ev.status, ev.reason) == (Status.REWARD_HACK, "left a thread")
    assert {"guard:thread", "guard:output_type"} <= set(ev.flags)
    ev = _review(Status.PASSED, [wrong])
    assert (ev.status, ev.reason) == (Status.INCORRECT, "not a tensor")
    ev = _review(Status.RUNTIME_ERROR, [wrong])  # an INCORRECT finding does not hide a crash
    assert (ev.status, ev.reason) == (Status.RUNTIME_ERROR, "earlier reason")
    ev = _review(Status.INCORRECT, [hack])  # a hack outranks a wrong answer
    assert ev.status == Status.REWARD_HACK
    ev = _review(Status.PASSED, [{"kind": "x", "status": "PASSED", "reason": "forged"}, {"junk": 1}])
    assert ev.status == Status.PASSED and ev.flags == []


def test_review_allows_the_declared_in_place_alias_only() -> None:
    alias = Finding("output_aliases_input", INCORRECT, "shares memory", {"output": 0, "input": 0}).as_dict()
    ev = _review(Status.PASSED, [alias], "tests/fixtures/tiny/row_write")
    assert ev.status == Status.PASSED and ev.findings == []  # the record lists no finding for the contract
    other = Finding("output_aliases_input", INCORRECT, "shares memory", {"output": 0, "input": 1}).as_dict()
    ev = _review(Status.PASSED, [alias, other], "tests/fixtures/tiny/row_write")
    assert ev.status == Status.INCORRECT and ev.findings == [other]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_memoization_probe_on_cuda() -> None:
    g = torch.Generator(device="cuda").manual_seed(0)
    args = [torch.randn(4096, 4096, device="cuda", generator=g, dtype=torch.bfloat16) for _ in range(2)]

    def honest(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b

    assert memoization_probe(honest, args, 1e-4) is None
    cache: dict[tuple[int, int], torch.Tensor] = {}

    def memoized(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        key = (a.data_ptr(), b.data_ptr())
        if key not in cache:
            cache[key] = a @ b
        return cache[key]

    found = memoization_probe(memoized, args, 1e-6)
    assert found is not None and found.kind == "memoization"


def test_an_uncuttable_trace_is_a_reward_hack() -> None:
    """The all-stream timer flags `cupti_unattributed` when its trace cannot be cut into the timed
    samples; the worker's guard turns that into a finding (the event time would be blind)."""
    from types import SimpleNamespace

    from solbench.guards.hooks import _trace_findings

    assert _trace_findings(SimpleNamespace(flags=["side_stream_work"])) == []
    assert _trace_findings(None) == []
    found = _trace_findings(SimpleNamespace(flags=["cupti_unattributed"]))
    assert [(f.kind, f.status) for f in found] == [("trace_unattributed", REWARD_HACK)]
