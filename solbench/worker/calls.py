"""The one place the worker calls the candidate's ``run``, in every phase.

Correctness rounds, the timed calls and the memoization probe are *plans*: generators that yield
the argument list of each call they want made and are sent back its output (or thrown the
exception it raised). :func:`drive` makes every call, as ``run(*args)``, from the same line, on the
worker's main thread; the plans' own frames (the timing loop, the probe) are suspended generators
then, not on the stack. So a candidate that walks its callers (``sys._getframe``) sees the same
function names, modules and lines above ``run`` whatever the phase:
``drive`` < ``Worker.handle`` < ``serve`` < ``main`` < runpy.

What still differs, and is not hidden: the frames' local variables (the plan being driven), the
time between calls (rounds wait for the parent, timed calls follow each other), and whether the
argument tensors were seen before (timing sets repeat). The parent does not rely on the phases
looking alike for correctness: timed outputs are checked at samples it chose, inputs are edited
in place between samples, and a refresh run on new data follows the timing (solbench.timing.verify).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Any


def drive(run: Callable[..., Any], plan: Generator[Sequence[Any], Any, Any]) -> Any:
    """Make every call ``plan`` asks for as ``run(*args)``; return what the plan returns."""
    send, throw = plan.send, plan.throw
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            args = send(value) if error is None else throw(error)
        except StopIteration as done:
            return done.value
        value = error = None
        try:
            value = run(*args)
        except BaseException as err:  # noqa: B036 - thrown into the plan, which re-raises what it does not handle
            error = err
