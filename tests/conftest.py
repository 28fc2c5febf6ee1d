"""Shared test setup: an isolated NEURONHELPERS_HOME (twins, compile cache, runs), no network, and machine markers.

The suite runs on a CPU machine, a CUDA machine and a trn2 alike. The harness tests run their models on the
CPU backend everywhere (NEURONHELPERS_BACKEND=cpu unless NEURONHELPERS_TEST_BACKEND names another), and a test
that is about the machine itself says which machine it needs: ``@pytest.mark.machine("cpu")`` (no neuron
device, no GPU), ``"cuda"`` or ``"neuron"``; elsewhere it is skipped with the reason.
"""

import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The browser tests (the served explorer, the book): Debian's chromium, driven by Playwright; screenshots land here.
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = ROOT / "test-artifacts"


def launch_chromium(playwright):
    """Headless chromium with nothing of its own reaching for the network (sync, updates, QUIC)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
        "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"])


@pytest.fixture(scope="session", autouse=True)
def isolated_home(tmp_path_factory):
    """One home for the whole session: twins are built once and the compile cache is shared by the tests."""
    from neuronhelpers.core.settings import SHELF_ENV, shelf_home

    home = os.environ.get("NEURONHELPERS_TEST_HOME") or str(tmp_path_factory.mktemp("nh-home"))
    old = {k: os.environ.get(k) for k in ("NEURONHELPERS_HOME", "HF_HUB_OFFLINE", "TORCHINDUCTOR_CACHE_DIR", SHELF_ENV)}
    os.environ[SHELF_ENV] = str(shelf_home())  # the real checkpoints `make checkpoints` installed, read-only to tests
    os.environ["NEURONHELPERS_HOME"] = home
    os.environ["HF_HUB_OFFLINE"] = "1"  # never reach for the Hub in tests
    os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
    yield Path(home)
    for key, value in old.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


# The tests `make test-fast` leaves out: each compiles a model, builds twins, starts a cluster, a browser or a notebook
# kernel, or runs the CLI end to end (more than 3 s each on 2 cores, measured with `pytest --durations=0`). A new test
# that is that slow belongs here; everything else is the inner loop (`pytest -m "not slow"`, about two minutes).
SLOW_TESTS = frozenset({
    "test_app_browser.py::test_a_catalog_user_browses_the_served_page",
    "test_app_browser.py::test_the_published_layout_shows_cores_memory_reason_date_and_runner",
    "test_published.py::test_the_causes_command_holds_the_catalog_against_a_trainium_folder",
    "test_published.py::test_a_twin_row_offered_to_the_published_layout_is_refused_in_one_line",
    "test_app_lifecycle.py::test_a_signal_to_the_app_takes_voila_and_its_kernels_down",
    "test_cache.py::test_rows_say_whether_the_run_hit_the_cache",
    "test_end_to_end.py::test_a_model_generate_runs_eagerly_is_a_compile_failure_never_a_pass",
    "test_end_to_end.py::test_cli_run_qwen3_passes_exactly",
    "test_end_to_end.py::test_perturbed_weight_is_caught_as_mismatch",
    "test_end_to_end.py::test_saved_run_py_alone_prints_the_same_tokens",
    "test_end_to_end.py::test_vlm_twin_runs_end_to_end",
    "test_evidence.py::test_a_compile_failure_says_the_device_ran_the_model_eagerly",
    "test_evidence.py::test_a_compiled_pass_carries_its_eager_rate_speedup_and_graph_figures",
    "test_evidence.py::test_run_py_eager_runs_the_model_on_the_device_with_nothing_compiled",
    "test_fleet.py::test_a_model_needing_more_cores_than_any_node_is_an_untested_row_not_a_hang",
    "test_fleet.py::test_a_node_lost_mid_sweep_loses_and_duplicates_nothing",
    "test_fleet.py::test_a_task_that_keeps_dying_is_retried_a_bounded_number_of_times_then_recorded_untested",
    "test_fleet.py::test_models_land_on_nodes_with_the_cores_their_plan_asks_for",
    "test_fleet.py::test_real_twins_on_the_cluster_and_a_driver_killed_with_sigkill_resumes",
    "test_forkserver.py::test_a_crash_in_a_forked_run_is_its_exit_status",
    "test_forkserver.py::test_a_forked_run_is_its_own_session_with_the_callers_argv_env_and_cwd",
    "test_forkserver.py::test_a_forked_run_past_its_timeout_is_killed_with_its_children",
    "test_forkserver.py::test_a_run_whose_environment_differs_at_import_time_starts_a_fresh_python",
    "test_forkserver.py::test_when_the_server_dies_runs_fall_back_to_a_fresh_python",
    "test_judges.py::test_lm_judge_accuracy_on_held_out_english_and_degenerate_output",
    "test_judges.py::test_offline_the_default_judge_is_the_shelf_smollm2_and_reads_real_english",
    "test_libraries.py::test_a_library_twin_is_its_own_twin_not_the_transformers_one_of_the_same_architecture",
    "test_libraries.py::test_a_perturbed_weight_fails_as_a_mismatch_with_the_figures",
    "test_libraries.py::test_a_twin_passes_against_its_cpu_reference_with_its_figures",
    "test_libraries.py::test_the_stored_run_py_alone_reproduces_the_output",
    "test_libraries.py::test_the_twins_command_lists_the_new_tasks_twins",
    "test_libraries.py::test_twins_are_real_library_checkpoints_built_offline_and_tiny",
    "test_models.py::test_cli_bad_model_is_one_line_exit_2_no_traceback",
    "test_models.py::test_cli_run_of_a_relative_folder_passes_without_reaching_for_the_hub",
    "test_models.py::test_cli_verbose_shows_the_traceback",
    "test_models.py::test_local_folder_resolves_with_task_from_its_model_type",
    "test_network.py::test_doctor_says_the_hub_is_unreachable",
    "test_notebooks.py::test_notebook_executes_headless_and_shows_what_it_claims",
    "test_notebooks_book.py::test_the_book_of_the_lessons_as_they_ran_reads_offline_in_a_browser",
    "test_packaging.py::test_setup_keeps_the_torch_a_python_already_has",
    "test_recipe.py::test_the_device_run_generates_32_greedy_tokens_with_a_static_cache_under_fullgraph_compile",
    "test_reference_cache.py::test_a_second_run_reuses_the_reference",
    "test_sharded.py::test_a_failing_second_rank_fails_the_run_within_seconds_and_leaves_no_process",
    "test_shelf.py::test_real_minilm_offline_passes_within_tolerance",
    "test_shelf.py::test_real_smollm2_offline_passes_exactly_with_english_text",
    "test_sharded.py::test_moe_over_two_cores_uses_expert_parallelism",
    "test_sharded.py::test_tp_over_two_cores_equals_the_single_core_reference",
    "test_sharded.py::test_without_an_affordable_reference_a_judge_decides",
    "test_sweep.py::test_a_second_sweep_runs_nothing_for_a_relative_folder_and_a_model_planned_on_two_cores",
    "test_sweep.py::test_bad_input_in_a_list_is_one_line_and_no_row",
    "test_sweep.py::test_injected_faults_become_classified_rows_and_the_sweep_finishes",
    "test_sweep.py::test_kill_9_mid_sweep_then_rerun_keeps_finished_rows_and_runs_only_the_rest",
    "test_twins.py::test_the_selected_transformers_twins_build_load_back_and_stay_tiny",
})


def pytest_configure(config):
    config.addinivalue_line("markers", "machine(kind): the test is about a cpu, cuda or neuron machine; skipped elsewhere")
    config.addinivalue_line("markers", "slow: compiles, builds twins or starts services (left out of make test-fast)")
    os.environ["NEURONHELPERS_BACKEND"] = os.environ.get("NEURONHELPERS_TEST_BACKEND", "cpu")


def machine_kind() -> str:
    """What this machine is: neuron (a neuron device), cuda (a GPU) or cpu."""
    from neuronhelpers.core.backends import neuron_device_present

    if neuron_device_present():
        return "neuron"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def pytest_collection_modifyitems(config, items):
    kind = None
    for item in items:
        if f"{item.path.name}::{item.originalname}" in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
        marker = item.get_closest_marker("machine")
        if marker is None:
            continue
        kind = kind or machine_kind()
        if marker.args[0] != kind:
            item.add_marker(pytest.mark.skip(reason=f"needs a {marker.args[0]} machine; this one is {kind}"))


def run_cli(*args, env=None, timeout=900):
    """Run ``python -m neuronhelpers ARGS`` as a user would; returns the CompletedProcess."""
    import subprocess

    return subprocess.run(
        [sys.executable, "-m", "neuronhelpers", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )


def result_row(model_id, result="PASS", **overrides):
    """A valid result row for dataset tests: CPU/inductor 2.13.0, transformers 5.23.0; PASS is exact,
    FAIL failed at compile. Any column can be overridden."""
    from neuronhelpers.store import schema as results

    values = dict(model_id=model_id, task="text-generation", result=result, neuron_cores=1, parallelism="none",
                  backend="cpu", compiler="inductor", compiler_version="2.13.0", library="transformers",
                  library_version="5.23.0", wall_s=12.5, peak_memory_bytes=2**30)
    values.update({"PASS": {"verification": "exact"},
                   "FAIL": {"stage": "compile", "error": "BackendCompilerFailed: x"}}.get(result, {}))
    values.update(overrides)
    return results.new_row(**values)


def imported_modules(source: str) -> set[str]:
    """The top-level modules a Python source imports (what a rendered run.py needs installed)."""
    import ast

    modules = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            modules.add(node.module.split(".")[0])
    return modules


def resumed_results(out, models, first, stdout: str):
    """After a killed sweep was rerun: every model has one row, the rows finished before the kill were kept (not
    run again), and the rerun ran only the rest. Returns the final results."""
    from neuronhelpers.store import dataset

    final = dataset.load_results(out)
    assert sorted(final.model_id) == sorted(models)  # none missing, none duplicated
    kept = final.set_index("model_id").loc[list(first.model_id), "timestamp"]
    assert list(kept) == list(first.set_index("model_id")["timestamp"])  # finished rows were not rerun
    assert f"{len(models) - len(first)} run now" in stdout
    return final
