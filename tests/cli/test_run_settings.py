"""The run settings on the command line come from RunOptions alone: every field is a flag of `solbench run` with
the model's default and help, and what a user gives reaches the options under the field's name."""

from __future__ import annotations

import click
import pytest
import typer
from typer.testing import CliRunner

from solbench.cli import app
from solbench.cli._common import run_settings
from solbench.engine.options import RunOptions


def _params(name: str) -> dict[str, click.Parameter]:
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    return {p.name: p for p in command.params}


def test_every_run_option_is_a_flag_of_run_with_the_models_help():
    params = _params("run")
    missing = sorted(set(RunOptions.model_fields) - set(params))
    assert not missing, f"RunOptions fields without a `solbench run` flag: {missing}"
    for name, field in RunOptions.model_fields.items():
        assert field.description and field.description.split(" (")[0][:40] in params[name].help or name == "guards"
        if field.default_factory is None and not isinstance(field.default, tuple):
            assert params[name].default == field.default, name


@pytest.mark.parametrize("command, fields", [
    ("profile", {"device", "gpu", "budget_s", "timeout_s", "compile_timeout_s", "seed", "guards", "worker_user"}),
    ("serve", {"device", "gpu", "gpus", "cluster", "budget_s", "timeout_s", "compile_timeout_s"}),
])
def test_other_commands_take_the_fields_they_name(command, fields):
    params = _params(command)
    assert fields <= set(params)
    assert not (set(RunOptions.model_fields) - fields) & set(params)


def test_given_flags_reach_the_settings_by_field_name():
    seen: dict = {}
    probe = typer.Typer()

    @probe.command()
    @run_settings("timeout_s", "cooldown_max_s", "guards", "worker_reads", "seed")
    def cmd(name: str = typer.Argument(...), settings: dict = None, quiet: bool = typer.Option(False, "--quiet")) -> None:
        seen.update(settings, name=name, quiet=quiet)

    result = CliRunner().invoke(probe, ["x", "--timeout", "7", "--cooldown", "2.5", "--no-guards", "--worker-read",
                                        "/a", "--worker-read", "/b", "--quiet"])
    assert result.exit_code == 0, result.output
    assert seen == {"timeout_s": 7.0, "cooldown_max_s": 2.5, "guards": False, "worker_reads": ("/a", "/b"),
                    "name": "x", "quiet": True}
    seen.clear()
    assert CliRunner().invoke(probe, ["y"]).exit_code == 0
    # defaults come through as the model's (None ones are left out: the model computes them)
    assert seen == {"timeout_s": RunOptions.model_fields["timeout_s"].default,
                    "cooldown_max_s": RunOptions.model_fields["cooldown_max_s"].default, "guards": True,
                    "name": "y", "quiet": False}
