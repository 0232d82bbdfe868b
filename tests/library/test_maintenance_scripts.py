"""The maintenance commands under scripts/: they run from the checkout, their --check passes on the
committed files, and they report errors with exit code 2 (the tables themselves are checked by
test_coverage.py and test_llama_layer.py)."""

from __future__ import annotations

from pathlib import Path

from solbench.engine.problem_code import load_module

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def test_render_model_layers_checks_and_reports_errors(tmp_path, capsys):
    main = load_module(SCRIPTS / "render_model_layers.py", "render_model_layers").main
    assert main(["--check"]) == 0  # docs/model_layers.md is current
    bad = tmp_path / "bad.md"
    bad.write_text("<!-- rollup tokens=2 -->\n<!-- /rollup -->\n")
    assert main([str(bad), "--problems", str(tmp_path)]) == 2
    assert "needs model=" in capsys.readouterr().err
    assert main([str(tmp_path / "missing.md")]) == 2
    stale = tmp_path / "stale.md"
    stale.write_text("<!-- rollup model=llama3_1_8b tokens=1 phase=decode context=64 -->\nold\n<!-- /rollup -->\n")
    assert main([str(stale), "--check"]) == 1
    assert "old" in stale.read_text()
    assert main([str(stale)]) == 0 and "old" not in stale.read_text()


def test_update_problems_readme_check_passes():
    assert load_module(SCRIPTS / "update_problems_readme.py", "update_problems_readme").main(["--check"]) == 0


def test_run_library_resume_skips_only_pairs_passed_with_the_shipped_file():
    """A PASSED record counts for --resume only when its solution_sha256 is the shipped file's: a record of an
    earlier version (H200, 2026-12-02: qk_norm_rope's eager changed after its decode_b1 record) runs again."""
    from solbench.api import plan_run

    drop_done = load_module(SCRIPTS / "run_library.py", "run_library").drop_done
    folder = Path(__file__).resolve().parents[2] / "problems" / "qwen3_30b_a3b" / "qk_norm_rope"
    (item,) = plan_run([folder])
    eager = next(c for c in item.candidates if c.name == "torch_eager")
    item.candidates = [eager]
    first, rest = item.workloads[0], item.workloads[1:]
    done = {(item.problem.name, w.name, "torch_eager", eager.sha256) for w in rest}
    done.add((item.problem.name, first.name, "torch_eager", "0" * 64))  # an earlier version of the file
    drop_done(item, done)
    assert [w.name for w in item.workloads] == [first.name] and item.candidates == [eager]


def test_eager_extremes_counts_only_records_of_the_shipped_file(tmp_path, capsys):
    """issue 29's check: a PASSED GPU record at each extreme, made with the torch_eager file as shipped now."""
    import hashlib
    import json

    module = load_module(SCRIPTS / "eager_extremes.py", "eager_extremes")
    folder = Path(__file__).resolve().parents[2] / "problems" / "qwen3_30b_a3b" / "qk_norm_rope"
    sha = hashlib.sha256((folder / "solutions" / "torch_eager.py").read_bytes()).hexdigest()
    results = tmp_path / "results"
    results.mkdir()
    assert module.main([str(results), "--problems", str(folder)]) == 1  # nothing measured: both extremes missing

    def record(workload, digest, status="PASSED", device="cuda"):
        return json.dumps({"problem": "qwen3_30b_a3b.qk_norm_rope", "workload": workload, "solution": "torch_eager",
                           "status": status, "device_type": device, "solution_sha256": digest})

    lines = [record("decode_b1", "0" * 64), record("prefill_b4_s4096", sha), record("decode_b1", sha, device="cpu")]
    (results / "a.jsonl").write_text("\n".join(lines) + "\n")
    found, missing = module.missing_extremes(folder, results)
    assert found == 1 and missing == ["qwen3_30b_a3b.qk_norm_rope decode_b1: no PASSED record of the shipped "
                                      "torch_eager (earlier versions passed)"]
    (results / "b.jsonl").write_text(record("decode_b1", sha) + "\n")
    capsys.readouterr()
    assert module.main([str(results), "--problems", str(folder)]) == 0
    assert "2 of 2 extremes PASSED" in capsys.readouterr().out
