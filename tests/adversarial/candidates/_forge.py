"""Shared by the forgery exploits (not a candidate): rewrite the worker's timing reply on its way out.

The worker calls ``run`` from its request loop (``serve``), whose frame holds the object that encodes
every reply (``pool``). Replacing that object's ``encode`` (an instance attribute: no module global
changes) rewrites each timing reply just before it is sent: the outputs, kept samples and refresh run
stay real, so every re-check passes, and only the figures lie. Every later request (the burst) is
served as usual.
"""

import sys
from collections.abc import Callable

STATS = ("median_s", "p10_s", "p90_s", "iqr_s", "min_s", "mean_s")


def install(transform: Callable[[dict], dict]) -> bool:
    """Rewrite every timing reply of this worker with ``transform``; False when no loop was found."""
    frame = sys._getframe(1)
    while frame is not None:
        pool = frame.f_locals.get("pool") if frame.f_code.co_name == "serve" else None
        if pool is not None:
            if not getattr(pool, "_forged", False):
                encode = pool.encode

                def forged(reply: dict, encode=encode) -> object:
                    if isinstance(reply, dict) and isinstance(reply.get("timing"), dict):
                        reply["timing"] = transform(dict(reply["timing"]))
                    return encode(reply)

                pool.encode = forged
                pool._forged = True
            return True
        frame = frame.f_back
    return False


def scale(timing: dict, factor: float, fields: tuple[str, ...] = STATS, samples: bool = True) -> dict:
    """The timing with ``fields`` (and the raw samples) multiplied by ``factor``."""
    for k in fields:
        if isinstance(timing.get(k), (int, float)):
            timing[k] = timing[k] * factor
    if samples and isinstance(timing.get("samples_s"), list):
        timing["samples_s"] = [s * factor for s in timing["samples_s"]]
    return timing
