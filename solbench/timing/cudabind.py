"""The CUDA functions the timers and guards call, read from torch once, at import, before any candidate code.

The worker imports solbench.timing before the candidate, so a candidate that patches ``torch.cuda.Event``
or ``torch.cuda.synchronize`` later does not change what the timers call; the modules that use these
import them from here under their own names, which the integrity guard watches. The clock functions of
``time`` are bound in :mod:`solbench.timing.config` (no torch there: the parent imports it).
"""

from __future__ import annotations

import torch

Event = torch.cuda.Event
EventBase = torch.cuda.Event.__mro__[1]
record = getattr(EventBase, "record", None)
elapsed_ms = getattr(EventBase, "elapsed_time", None)
synchronize = torch.cuda.synchronize
current_stream = torch.cuda.current_stream
sleep = getattr(torch.cuda, "_sleep", None)
Stream = torch.cuda.Stream
stream_ctx = torch.cuda.stream
CUDAGraph = torch.cuda.CUDAGraph
