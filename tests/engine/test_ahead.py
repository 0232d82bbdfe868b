"""Lanes' preparations ahead (solbench.engine.ahead): run in the order asked, taken once, cancelled."""

from __future__ import annotations

import threading

from solbench.engine.ahead import Preparations


def test_preparations_run_in_the_order_asked_on_their_threads_and_are_taken_once():
    order: list[str] = []
    gate = threading.Event()
    preps = Preparations(1)

    def make(name: str):
        def prepare(cancel: threading.Event) -> str:
            gate.wait(5)
            order.append(name)
            return name
        return prepare

    assert preps.ask("a", make("a")) and preps.ask("b", make("b"))
    assert not preps.ask("a", make("again"))  # asked for already
    gate.set()
    a, b = preps.take("a"), preps.take("b")
    assert a is not None and b is not None and (a.result(), b.result()) == ("a", "b")
    assert order == ["a", "b"] and preps.take("a") is None and "a" not in preps
    preps.close()


def test_nothing_is_prepared_without_threads():
    preps = Preparations(0)
    assert not preps.ask("a", lambda cancel: "a") and preps.take("a") is None


def test_cancel_sets_the_running_ones_event_skips_those_not_begun_and_keeps_what_it_is_told():
    started, release = threading.Event(), threading.Event()
    seen: list[bool] = []
    preps = Preparations(1)

    def running(cancel: threading.Event) -> str:
        started.set()
        release.wait(5)
        seen.append(cancel.is_set())
        return "ran"

    preps.ask("running", running)
    started.wait(5)
    preps.ask("queued", lambda cancel: "queued")
    preps.ask("kept", lambda cancel: "kept")
    gone = preps.cancel(keep={"kept"})
    release.set()
    assert sorted(p.cancel.is_set() for p in gone) == [True, True] and len(gone) == 2
    results = sorted(str(p.result()) for p in gone)
    assert results == ["None", "ran"]  # the queued one never ran: a cancelled future gives None
    assert seen == [True] and "kept" in preps and "running" not in preps
    kept = preps.take("kept")
    assert kept is not None and kept.result() == "kept"
    preps.close()


def test_a_failed_preparation_gives_none():
    preps = Preparations(1)

    def fails(cancel: threading.Event) -> str:
        raise RuntimeError("load failed")

    preps.ask("x", fails)
    prep = preps.take("x")
    assert prep is not None and prep.result() is None
    preps.close()
