"""Shared test helpers (``record_factory``) are importable from every test folder; the tests measured
slow are marked ``slow`` here (the default run leaves them out, CI's second step runs them); every
test gets back the signal handlers it found (Ray's SIGTERM handler once turned a `timeout` of the
whole run into a SystemExit inside a later test)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

# Tests that took 5 s or more each on a loaded 2-core machine (``--durations``; about a second or more on
# a quiet one): mostly a `solbench` child process (torch's import alone is a second or two) or a worker.
# Whole files where a shared fixture does that work; else the test functions (every parameter).
# New slow tests are marked where they are written (``@pytest.mark.slow``); this list is the backlog.
SLOW_MODULES = {
    "adversarial/test_exploits.py",
    "adversarial/test_jit_sibling_append.py",
    "cli/test_run_command.py",
    "data/test_fuzz_files.py",
    "data/test_packaging.py",
    "dispatch/test_executors.py",
    "engine/test_calibrate.py",
    "engine/test_interleave.py",
    "engine/test_stopping.py",
    "data/test_validate.py",
    "present/test_fuzz_result_lines.py",
    "present/test_report_browser.py",
}
SLOW_TESTS = {
    "cli/test_foundation_commands.py": {
        "test_list_and_specs_and_schema", "test_sol_by_name_and_one_workload", "test_sol_json_contract",
        "test_sol_table_is_readable", "test_user_errors_are_one_line", "test_validate_reports_every_error_and_exits_1",
        "test_validate_shipped_files",
    },
    "cli/test_new_user.py": {
        "test_cpu_demo_measures_the_cpu_and_says_so", "test_near_miss_names_get_suggestions_on_one_line",
        "test_plot_into_a_missing_folder_is_an_error_not_a_new_folder",
        "test_run_prints_a_plain_line_per_record_when_stderr_is_not_a_terminal",
    },
    "cli/test_present_commands.py": {
        "test_an_error_naming_record_text_is_one_clean_line", "test_committed_results_read_without_a_warning",
        "test_hostile_lines_are_one_warning_each_and_the_rest_is_shown",
    },
    "cli/test_run_placement.py": {"test_placement_mistakes_are_one_line"},
    "cli/test_transport_option.py": {"test_bad_transport_is_one_line"},
    "cli/test_validate_all_errors.py": {
        "test_a_bad_name_does_not_hide_a_workload_whose_shapes_do_not_evaluate",
        "test_a_removed_tensor_is_not_blamed_twice", "test_schema_and_semantic_errors_come_together",
    },
    "data/test_cost_hook.py": {
        "test_run_records_carry_the_mean_cost_of_the_timed_sets",
        "test_shipped_data_dependent_problems_declare_a_hook", "test_validate_deep_checks_the_hook",
    },
    "data/test_hostile_files.py": {"test_run_progress_and_tables_escape_candidate_names"},
    "data/test_interop.py": {
        "test_export_of_a_missing_results_file_is_one_line_and_writes_nothing",
        "test_linear_backward_custom_inputs_and_its_solution_pass_on_cpu",
        "test_missing_safetensors_input_is_refused_in_one_line",
    },
    "data/test_results_store.py": {"test_concurrent_appends_lose_nothing"},
    "engine/test_interleave.py": {"test_rounds_alternate_per_workload"},
    "engine/test_jit_cache.py": {
        "test_another_candidate_never_sees_it", "test_without_a_store_every_run_compiles_afresh",
    },
    "engine/test_prestart.py": {"test_next_problems_worker_is_started_while_the_current_problem_runs"},
    "engine/test_profiling.py": {
        "test_a_failing_ncu_leaves_the_record_and_says_why_in_one_line",
        "test_profile_under_ncu_gives_the_record_the_exports_counters",
    },
    "engine/test_runner.py": {
        "test_guards_cannot_be_blinded_from_the_candidate", "test_guards_off_flags_every_record_and_reviews_nothing",
        "test_run_problems_in_process",
    },
    "engine/test_setup.py": {
        "test_setup_failure_names_the_setup_phase", "test_setup_runs_once_per_workload_before_the_rounds",
        "test_setup_that_caches_an_answer_is_incorrect",
    },
    "guards/test_guards.py": {"test_memoization_probe_passes_honest_code_and_flags_a_cache"},
    "guards/test_guards_process.py": {
        "test_make_undumpable_and_subreaper_take_effect", "test_restrict_writes_allows_only_the_given_folders",
        "test_subreaper_keeps_a_double_forked_daemon_in_view",
    },
    "guards/test_sandbox.py": {
        "test_landlock_reads_only_the_given_folders", "test_oom_floor_set_as_root_holds_after_the_drop",
        "test_oom_preference_is_set_and_inherited", "test_private_view_and_drop",
        "test_seccomp_refuses_mode_owner_and_acl_changes_for_every_thread",
        "test_the_worker_rules_deny_a_fake_home_and_keep_python_working",
    },
    "library/test_data_dependent_problems.py": {
        "test_moe_cost_counts_touched_experts_and_routing_is_skewed", "test_varlen_cost_is_the_causal_pairs",
    },
    "present/test_chart_marks.py": {
        "test_environment_and_timing_read_as_labels_with_units",
        "test_report_inlines_svg_charts_with_tooltips_and_flags_the_noisy_time",
        "test_small_sol_bars_show_and_are_to_scale", "test_workload_table_is_as_wide_with_four_candidates_as_with_one",
    },
    "present/test_compare.py": {
        "test_cli_json_and_gate", "test_cli_mistakes_are_one_line", "test_verdicts_per_pair_and_missing",
    },
    "present/test_leaderboard.py": {
        "test_cli_errors_are_one_line_without_traceback", "test_cli_leaderboard_formats_and_output",
    },
    "present/test_levels_chart.py": {
        "test_plot_roofline_levels_writes_the_chart", "test_the_cli_draws_it_and_refuses_records_without_profiles",
        "test_the_report_shows_utilization_diagnosis_and_the_levels_chart",
    },
    "present/test_model_view.py": {"test_cli_json_exit_codes_and_chart", "test_report_has_a_model_section"},
    "present/test_plots.py": {
        "test_cli_plot_commands", "test_hostile_names_do_not_break_charts", "test_roofline_file_formats",
    },
    "present/test_report.py": {
        "test_measured_roof_report", "test_parallel_chart_drawing_gives_the_same_charts", "test_png_and_no_charts",
        "test_present_demo", "test_self_contained_and_no_script", "test_write_report_and_cli",
    },
    "present/test_significance.py": {"test_no_shift_false_slower_rate_at_most_5_percent"},
    "worker/test_call_path.py": {"test_every_phase_calls_run_from_the_same_frames_and_the_checks_come_back"},
    "worker/test_devwire.py": {"test_real_worker_answers_an_unmappable_device_request_and_the_client_falls_back"},
    "worker/test_launcher.py": {"test_a_worker_under_a_launcher_profiles_one_call_and_exits"},
    "worker/test_library_baselines.py": {"test_liger_baselines_are_skipped_without_liger"},
    "worker/test_worker.py": {
        "test_worker_session_load_call_errors_and_close", "test_worker_timeout_kills_and_reports",
    },
    "worker/test_worker_sandbox.py": {
        "test_log_is_capped_and_without_control_characters", "test_worker_as_nobody", "test_worker_as_this_user",
    },
}

# Measured in the default run of 2026-12-02 (19 min 49 s on the loaded 2-core machine): the slowest left.
SLOW_TESTS_2 = {
    "library/test_coverage.py": {"test_readme_table_is_current"},
    "library/test_maintenance_scripts.py": {"test_update_problems_readme_check_passes", "test_render_model_layers_checks_and_reports_errors"},
    "engine/test_jit_cache.py": {"test_a_candidate_reuses_its_own_cache_in_a_later_run"},
    "data/test_interop.py": {"test_kernelbench_modules_import_with_counted_flops"},
    "data/test_cost_hook.py": {"test_validate_deep_flags_bytes_above_auto", "test_list_uses_the_hook_too", "test_sol_json_gives_the_hook_on_seed_zero_inputs"},
    "cli/test_present_commands.py": {"test_report_and_charts_name_what_they_leave_out"},
    "library/test_sampling_tree_problems.py": {"test_sampling_triton", "test_sampling_ties_go_to_the_lower_id"},
    "library/test_llama_layer.py": {"test_unfused_bf16_gemm_then_add_passes_the_tolerance"},
}
for _module, _names in SLOW_TESTS_2.items():
    SLOW_TESTS[_module] = SLOW_TESTS.get(_module, set()) | set(_names)

_SIGNALS = [s for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT) if hasattr(signal, s.name)]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        try:
            module = item.path.resolve().relative_to(here).as_posix()
        except ValueError:
            continue
        name = getattr(item, "originalname", item.name)
        if module in SLOW_MODULES or name in SLOW_TESTS.get(module, ()):
            item.add_marker(pytest.mark.slow)


# The handlers this run started with (before any test could install one).
_STARTED_WITH = {s: signal.getsignal(s) for s in _SIGNALS}


@pytest.fixture(autouse=True)
def _signal_handlers_restored():
    """After each test the run's own signal handlers are back: SIGTERM must stop the run, not raise
    SystemExit inside whatever test runs next (``ray.init``, even in a module fixture, installs one)."""
    yield
    for s, handler in _STARTED_WITH.items():
        if handler is not None and signal.getsignal(s) is not handler:
            signal.signal(s, handler)


class _SimulatedMapping:
    """A stand-in for a CUDA VMM mapping: a memfd mapped here, so the two sides really share memory."""

    def __init__(self, fd: int, size: int):
        import mmap

        self.size, self.closed = size, False
        self._mm = mmap.mmap(fd, size)

    def tensor(self, offset: int = 0, nbytes: int | None = None):
        import torch

        nbytes = self.size - offset if nbytes is None else nbytes
        assert 0 <= offset and offset + nbytes <= self.size
        return torch.frombuffer(self._mm, dtype=torch.uint8, count=nbytes, offset=offset) if nbytes else \
            torch.empty(0, dtype=torch.uint8)

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def simulated_pool(monkeypatch):
    """The device route with host memory in place of device memory: the protocol, not the driver."""
    import os

    import torch

    from solbench.worker import devwire, vmm

    def create(nbytes: int, device: int):
        fd = os.memfd_create("simulated-pool")
        size = max(4096, -(-nbytes // 4096) * 4096)
        os.ftruncate(fd, size)
        return _SimulatedMapping(fd, size), fd

    monkeypatch.setattr(vmm, "create", create)
    monkeypatch.setattr(vmm, "open_fd", lambda fd, size, device: _SimulatedMapping(fd, size))
    monkeypatch.setattr(devwire, "_CUDA", "cpu")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "set_device", lambda *a: None)
