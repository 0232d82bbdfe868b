"""The demo's problems and, on a CPU, the ceilings it is scored against."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from solbench.data import Problem, problems_root, resolve_problem
from solbench.errors import ProblemError

# The demo's problems, by name: the seed GEMM plus memory-bound ones, each skipped when absent.
DEMO_PROBLEMS = (
    "llama3_1_8b.attn_o_proj_residual",
    "llama3_1_8b.rmsnorm",
    "llama3_1_8b.swiglu",
    "llama3_1_8b.rope",
    "llama3_1_8b.fused_add_rmsnorm",
    "llama3_1_8b.embedding",
)
# On the CPU the demo runs this shipped candidate only: Triton and CuPy ones need a GPU, and
# torch.compile spends tens of seconds compiling per problem there.
CPU_DEMO_CANDIDATE = "torch_eager.py"
DEMO_MAX_PROBLEMS = 4



def demo_problems(problems_dir: Path | None = None, limit: int = DEMO_MAX_PROBLEMS) -> tuple[list[Problem], list[str]]:
    """The demo's problems found under the problems folder, and the names not found."""
    root = problems_root(problems_dir)
    found, missing = [], []
    for name in DEMO_PROBLEMS:
        try:
            found.append(resolve_problem(name, root))
        except ProblemError:
            missing.append(name)
    return found[:limit], missing


DEMO_CPU_SPEC = "cpu.yaml"  # its id: cpu_<host>_<time> (unique: never ranked with another roof)


def demo_cpu_spec(folder: Path, log: Callable[[str], None], dtypes: Sequence[str] = ("float32",)) -> tuple[Path, str]:
    """Measure this CPU's ceilings (``solbench calibrate --quick``) into ``folder``; the spec's path
    and a note saying what the demo is scored against (the roof of each of ``dtypes``, the compute
    dtypes of its problems). A built-in estimate would put every SOL near 0.001: it bounds what any
    CPU could do, not what this one does."""
    from solbench.engine.calibrate import calibrate
    from solbench.units import si

    log("measuring this CPU's ceilings first (matmul and memory bandwidth, a few seconds), to score against")
    spec, path = calibrate("cpu", folder / DEMO_CPU_SPEC, quick=True, log=lambda line: None)
    slow = spec.measured.model_dump().get("no_fast_path", {}) if spec.measured else {}
    roofs = ", ".join(f"{d} {si(spec.peak(d), 'FLOP/s')}" + (" (no fast path: the float32 rate)" if d in slow else "")
                      for d in sorted(set(dtypes)))
    return path, (f"CPU demo: SOL is against this CPU's measured ceilings ({spec.id}: {si(spec.memory_bandwidth, 'B/s')} "
                  f"memory, matmul {roofs}; {path}), not a datasheet: 1.0 = as fast as its best copy or matmul")
