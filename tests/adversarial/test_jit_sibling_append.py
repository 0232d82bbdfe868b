"""Exploit (not in peers.md): plant code in another candidate's JIT cache through a sibling file.

Two candidates share an entry file byte for byte (``torch_compile.py``, the documented pattern) and
differ only in the sibling it loads with ``load_sibling``. The attacker's sibling appends a wrong
``call`` to the module its JIT cache keeps (standing in for an Inductor module, which the real
attack appended to on the H200); with ``--jit-cache`` the victim, run later, loaded that module when
the key hashed the entry file alone (INCORRECT). The key now covers every file of the candidate's
folder and its place (``solbench.worker.jitcache.source_digest``): the victim never sees the
attacker's cache, and its own run twice reuses its own.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import solbench
from solbench.data.record import Status

HERE = Path(__file__).resolve().parent
TINY = HERE.parent / "fixtures" / "tiny" / "scaled_add"
PAIR = HERE / "jit_sibling_append"


def _place(tmp_path: Path, side: str) -> Path:
    """The shared entry file with this side's sibling next to it, in a folder of its own."""
    folder = tmp_path / side
    if not folder.is_dir():
        folder.mkdir()
        shutil.copy(PAIR / "torch_compile.py", folder / "torch_compile.py")
        shutil.copy(PAIR / f"{side}_eager.py", folder / "torch_eager.py")
    return folder / "torch_compile.py"


def _run(tmp_path: Path, side: str, store: Path):
    (record,) = solbench.run_problems([TINY], [_place(tmp_path, side)], device="cpu", rounds=3,
                                      budget_s=0.02, workers_ahead=0, output=tmp_path / f"{side}.jsonl",
                                      workloads=["n4"], jit_cache=store).records
    return record


@pytest.mark.slow
def test_a_siblings_planted_module_never_reaches_another_candidate(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert _run(tmp_path, "attacker", store).status == Status.PASSED.value  # honest itself: plants for later
    victim = _run(tmp_path, "victim", store)
    assert victim.status == Status.PASSED.value, victim.reason
    assert victim.harness["jit_cache_restored_bytes"] == 0
    again = _run(tmp_path, "victim", store)  # its own cache still comes back
    assert again.status == Status.PASSED.value and again.harness["jit_cache_restored_bytes"] > 0
