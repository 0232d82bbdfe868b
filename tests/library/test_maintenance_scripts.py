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
