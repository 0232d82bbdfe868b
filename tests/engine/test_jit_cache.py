"""--jit-cache: a candidate finds what its own earlier worker compiled, in a later run; a different
candidate (another source) never does; without the setting nothing is kept."""

from __future__ import annotations

from pathlib import Path

import solbench
from solbench.data.record import Status

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny" / "scaled_add"
# Reports whether its Inductor cache folder already holds the file it leaves there.
MARKER = '''"""{doc}"""
import os
import pathlib

_cache = pathlib.Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
print("jit cache:", "warm" if (_cache / "marker").exists() else "cold", flush=True)
_cache.mkdir(parents=True, exist_ok=True)
(_cache / "marker").write_text("compiled")


def run(x, y):
    return x * 2 + y
'''


def _candidate(folder: Path, name: str, doc: str) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(MARKER.format(doc=doc))
    return path


def _run(tmp_path: Path, candidate: Path, jit_cache: Path | None):
    (record,) = solbench.run_problems([TINY], [candidate], device="cpu", rounds=3, budget_s=0.02, workers_ahead=0,
                                      output=tmp_path / "r.jsonl", workloads=["n4"], jit_cache=jit_cache).records
    assert record.status == Status.PASSED.value, record.reason
    return record


def test_a_candidate_reuses_its_own_cache_in_a_later_run(tmp_path):
    store, cands = tmp_path / "store", tmp_path / "cands"
    first = _candidate(cands, "mine", "one candidate")
    cold = _run(tmp_path, first, store)
    assert "jit cache: cold" in cold.log and cold.harness["jit_cache_restored_bytes"] == 0
    warm = _run(tmp_path, first, store)
    assert "jit cache: warm" in warm.log and warm.harness["jit_cache_restored_bytes"] == len("compiled")


def test_another_candidate_never_sees_it(tmp_path):
    store, cands = tmp_path / "store", tmp_path / "cands"
    _run(tmp_path, _candidate(cands, "mine", "one candidate"), store)
    other = _run(tmp_path, _candidate(cands, "theirs", "another candidate, same code"), store)
    assert "jit cache: cold" in other.log


def test_without_a_store_every_run_compiles_afresh(tmp_path):
    first = _candidate(tmp_path / "cands", "mine", "one candidate")
    _run(tmp_path, first, None)
    again = _run(tmp_path, first, None)
    assert "jit cache: cold" in again.log and "jit_cache_restored_bytes" not in again.harness
