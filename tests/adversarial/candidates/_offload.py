"""Shared by the offload exploits (not a candidate): a helper process that computes the seed problem's
call for the worker, through a shared file mapping on the CPU or CUDA IPC (CuPy cudaMalloc buffers) on
a GPU. ``Helper().call(attn, weight, residual)`` starts it on first use; ``stop()`` kills and reaps it."""

import os
import subprocess
import sys
import tempfile

import torch

HELPER = r"""
import sys, torch
ipc = {}
for line in sys.stdin:
    word = line.split()
    if word[0] == "cpu":
        path, t, h = word[1], int(word[2]), int(word[3])
        n = t * h + h * h + t * h + t * h
        buf = torch.from_file(path, shared=True, size=n, dtype=torch.bfloat16)
        a, w, r, out = buf[:t * h].view(t, h), buf[t * h:t * h + h * h].view(h, h), buf[t * h + h * h:2 * t * h + h * h].view(t, h), buf[2 * t * h + h * h:].view(t, h)
        torch.addmm(r, a, w.t(), out=out)
    else:  # "gpu t h handle..." : IPC handles of four cudaMalloc buffers (attn, weight, residual, out)
        import cupy as cp
        t, h = int(word[1]), int(word[2])
        key = tuple(word[3:])
        if key not in ipc:
            views = []
            for hexh, n in zip(key, (t * h, h * h, t * h, t * h)):
                ptr = cp.cuda.runtime.ipcOpenMemHandle(bytes.fromhex(hexh))
                mem = cp.cuda.UnownedMemory(ptr, n * 2, None)
                views.append(torch.as_tensor(cp.ndarray((n,), cp.uint16, cp.cuda.MemoryPointer(mem, 0)), device="cuda").view(torch.bfloat16))
            ipc[key] = views
        a, w, r, out = ipc[key]
        torch.addmm(r.view(t, h), a.view(t, h), w.view(h, h).t(), out=out.view(t, h))
        torch.cuda.synchronize()
    sys.stdout.write("ok\n")
    sys.stdout.flush()
"""


class Helper:
    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.folder = tempfile.mkdtemp(prefix="offload-")
        self.shared: dict = {}

    def start(self) -> None:
        if self.proc is None:
            self.proc = subprocess.Popen([sys.executable, "-c", HELPER], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, text=True)

    def stop(self) -> None:
        """Kill and reap it (its CPU time then counts as the worker's children's)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def ask(self, line: str) -> None:
        self.start()
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        if self.proc.stdout.readline().strip() != "ok":
            raise RuntimeError("the helper did not answer")

    def call(self, attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self._gpu(attn, weight, residual) if attn.is_cuda else self._cpu(attn, weight, residual)

    def _cpu(self, attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        t, h = attn.shape
        if (t, h) not in self.shared:
            path = os.path.join(self.folder, f"{t}x{h}")
            n = 3 * t * h + h * h
            with open(path, "wb") as fh:
                fh.truncate(n * 2)
            self.shared[(t, h)] = (path, torch.from_file(path, shared=True, size=n, dtype=torch.bfloat16))
        path, buf = self.shared[(t, h)]
        buf[:t * h].copy_(attn.reshape(-1))
        buf[t * h:t * h + h * h].copy_(weight.reshape(-1))
        buf[t * h + h * h:2 * t * h + h * h].copy_(residual.reshape(-1))
        self.ask(f"cpu {path} {t} {h}")
        return buf[2 * t * h + h * h:].view(t, h).clone()

    def _gpu(self, attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        import cupy as cp

        t, h = attn.shape
        if (t, h) not in self.shared:
            views, handles = [], []
            for n in (t * h, h * h, t * h, t * h):
                ptr = cp.cuda.runtime.malloc(n * 2)  # a cudaMalloc of its own: IPC-shareable
                handles.append(bytes(cp.cuda.runtime.ipcGetMemHandle(ptr)).hex())
                mem = cp.cuda.UnownedMemory(ptr, n * 2, None)
                views.append(torch.as_tensor(cp.ndarray((n,), cp.uint16, cp.cuda.MemoryPointer(mem, 0)),
                                             device="cuda").view(torch.bfloat16))
            self.shared[(t, h)] = (views, " ".join(handles))
        (a, w, r, out), handles = self.shared[(t, h)]
        a.copy_(attn.reshape(-1))
        w.copy_(weight.reshape(-1))
        r.copy_(residual.reshape(-1))
        torch.cuda.synchronize()
        self.ask(f"gpu {t} {h} {handles}")
        return out.view(t, h).clone()
