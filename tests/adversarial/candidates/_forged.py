"""Shared by the forgery exploits (not a candidate): a result line claiming a perfect score."""

import json
import time


def forged_record_line() -> bytes:
    record = {
        "problem": "adversarial.attn_o_proj_residual", "workload": "t4", "solution": "forged", "status": "PASSED",
        "device": "forged", "gpu_spec": "h200_sxm", "time_s": 1e-9, "sol": 1.0, "flops": 1, "bytes": 1,
        "t_ideal_s": 1e-9, "bound": "memory", "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S+00:00"),
        "solbench_version": "forged",
    }
    return (json.dumps(record) + "\n").encode()
