"""The worker: the only process that runs candidate code (``python -m solbench.worker``), the
parent's handle on it (``client``), the byte format between them (``wire``) and candidate loading."""

from __future__ import annotations

from solbench._lazy import lazy_getattr

# What the other layers use, by the module that defines it; a module is loaded on first use, so importing
# the package loads none of them.
_HOME = {
    "burst_plan": "burst",
    "output_buffers": "burst",
    "stage_edits": "burst",
    "CandidateFile": "candidate",
    "baseline_library": "candidate",
    "baseline_of": "candidate",
    "describe_candidates": "candidate",
    "import_file": "candidate",
    "load_sibling": "candidate",
    "module_name": "candidate",
    "shipped_candidates": "candidate",
    "skipped_candidates": "candidate",
    "skipped_line": "candidate",
    "source_run_mismatch": "candidate",
    "stop_on_signals": "cleanup",
    "sweep_dead_workers": "cleanup",
    "WorkerClient": "client",
    "WorkerFailure": "client",
    "WorkerStartError": "client",
    "clean_log": "client",
    "describe_exit": "client",
    "memory_retried": "client",
    "device_index": "devwire",
    "pool_bytes": "devwire",
    "WorkerPool": "devwire",
    "cache_key": "jitcache",
    "source_digest": "jitcache",
    "enter_sandbox": "main",
    "exit_now": "main",
    "parse_arguments": "main",
    "release_device_memory": "main",
    "unsupported": "vmm",
    "SHM_MIN_BYTES": "wire",
    "encode_header": "wire",
    "recv_message": "wire",
    "send_encoded": "wire",
    "send_message": "wire",
    "SendArena": "wire",
}
__all__ = sorted(_HOME)


__getattr__ = lazy_getattr(__name__, _HOME)
