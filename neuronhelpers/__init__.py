"""neuronhelpers: does this Hugging Face model run unmodified on AWS Trainium, and how do I run it myself?

Data flows one way, one subpackage per stage, each importing only those above it in this list
(tests/test_structure.py holds it; the notebook that teaches each stage in brackets):

    core/      vocabulary, errors, settings, backends, versions, is the Hub reachable          [03, 06]
    plan/      how many NeuronCores hold a model, and how it is split (TP / EP)             [04]
    process/   a run.py's own process tree (timeout, limits, the JSON line), the fork server  [02, 06]
    recipes/   the run.py recipes and their renderer: the only source of run.py              [02]
    verdict/   per run: token and tensor checks, failure classification and its signature    [03]
    twins/     tiny twins: real architectures shrunk, built offline; broken copies           [02, 03, 05]
    models/    what a person typed -> a checkpoint to load; the Selected list; Hub rankings   [01, 02]
    store/     the row schema, version-pair Parquet files (ours and the published layout), diff and the gate,
               card, publish                                                                  [01, 06]
    run/       one model end to end: the measuring around run.py, the CPU reference or the judge, the row
                                                                                              [02, 04]
    analysis/  across rows: causes ranked, twins against real checkpoints and Trainium, declared vs measured
                                                                                              [03, 05]
    sweep/     many models, one process tree each: locally or on a Ray cluster              [06]
    ui/        the explorer, plots, the Voila app, the book, the workshop and its exercises    [00, 01, 05]
    cli/       the ``neuronhelpers`` command and ``doctor``

The names notebooks use are importable from here, so a lesson imports internals only where it says why (notebook 04
reads the recipe's own source). Each is loaded on first use; ``import neuronhelpers`` stays light:

    run_model, plan_run, summary_line, saved_output, render_run_py, recipe_params, render_requirements, plan_model,
    plan_cores, per_rank_layout, resolve_model, build_twin, broken_twin, perturbed_twin, twin_spec, architectures,
    verify_outputs, compare_tokens, make_judge, rank_causes, untested_reasons, verdict_counts_line, ranked_lines,
    twin_agreement, write_repro, remedies_line, remedies_frame, remedy_line,
    architecture_twin_rows, Answers, own_config_effects, own_config_line, read_isolated,
    agreement_line, trainium_agreement, trainium_agreement_line, declared_vs_measured, disagreement_line,
    load_results, version_pairs, select_pair, current_or_newest, newest_per_model, verdicts_per_pair,
    write_published_example, example_trainium_row, published_source, ran_on_labels, diff_results, release_steps,
    release_changes, change_counts, step_rows, VERDICT_CHANGES, check_expected, expected_frame, write_card,
    render_card, publish, contribute, sweep_models, summary_frame,
    excluded_rows, sweep_on_ray, FleetReport, explore, doctor, detect_backend, get_backend, hub_reachable,
    hub_status_line, compiler_for, last_json_line, GiB, UserError, check_answer, and the modules vocab, plots,
    settings, compile_cache, workshop

No top-level name is the name of a subpackage (the sweep function is ``sweep_models``, beside ``sweep/``).
"""

from importlib import import_module

from neuronhelpers.core.versions import __version__  # noqa: F401 - the one source is core/versions.py

# name -> "module:attribute" (or "module" for a module), imported when first used.
EXPORTS = {
    "run_model": "neuronhelpers.run.harness:run_model",
    "plan_run": "neuronhelpers.run.harness:plan_run",
    "summary_line": "neuronhelpers.run.harness:summary_line",
    "saved_output": "neuronhelpers.run.harness:saved_output",
    "render_run_py": "neuronhelpers.recipes.render:render_run_py",
    "recipe_params": "neuronhelpers.recipes.render:recipe_params",
    "render_requirements": "neuronhelpers.recipes.render:render_requirements",
    "plan_model": "neuronhelpers.plan.cores:plan_model",
    "plan_cores": "neuronhelpers.plan.cores:plan_cores",
    "per_rank_layout": "neuronhelpers.plan.cores:per_rank_layout",
    "resolve_model": "neuronhelpers.models.resolve:resolve_model",
    "build_twin": "neuronhelpers.twins.build:build_twin",
    "broken_twin": "neuronhelpers.twins.build:broken_twin",
    "perturbed_twin": "neuronhelpers.twins.build:perturbed_twin",
    "twin_spec": "neuronhelpers.twins.build:twin_spec",
    "architectures": "neuronhelpers.twins.build:architectures",
    "verify_outputs": "neuronhelpers.verdict.verify:verify_outputs",
    "compare_tokens": "neuronhelpers.verdict.verify:compare_tokens",
    "make_judge": "neuronhelpers.run.judge:make_judge",
    "rank_causes": "neuronhelpers.analysis.causes:rank_causes",
    "untested_reasons": "neuronhelpers.analysis.causes:untested_reasons",
    "verdict_counts_line": "neuronhelpers.analysis.causes:verdict_counts_line",
    "write_repro": "neuronhelpers.analysis.repro:write_repro",
    "remedies_line": "neuronhelpers.run.remedies:remedies_line",
    "remedies_frame": "neuronhelpers.run.remedies:remedies_frame",
    "remedy_line": "neuronhelpers.recipes.remedies:remedy_line",
    "twin_agreement": "neuronhelpers.analysis.agreement:twin_agreement",
    "agreement_line": "neuronhelpers.analysis.agreement:agreement_line",
    "architecture_twin_rows": "neuronhelpers.analysis.agreement:architecture_twin_rows",
    "Answers": "neuronhelpers.analysis.answers:Answers",
    "own_config_effects": "neuronhelpers.analysis.answers:own_config_effects",
    "own_config_line": "neuronhelpers.analysis.answers:own_config_line",
    "read_isolated": "neuronhelpers.analysis.answers:read_isolated",
    "trainium_agreement": "neuronhelpers.analysis.agreement:trainium_agreement",
    "trainium_agreement_line": "neuronhelpers.analysis.agreement:trainium_agreement_line",
    "write_published_example": "neuronhelpers.store.example:write_published_example",
    "ran_on_labels": "neuronhelpers.store.schema:ran_on_labels",
    "load_results": "neuronhelpers.store.dataset:load_results",
    "version_pairs": "neuronhelpers.store.dataset:version_pairs",
    "select_pair": "neuronhelpers.store.dataset:select_pair",
    "current_or_newest": "neuronhelpers.store.dataset:current_or_newest",
    "newest_per_model": "neuronhelpers.store.dataset:newest_per_model",
    "step_rows": "neuronhelpers.store.diff:step_rows",
    "VERDICT_CHANGES": "neuronhelpers.store.diff:VERDICT_CHANGES",
    "last_json_line": "neuronhelpers.process.tree:last_json_line",
    "GiB": "neuronhelpers.core.backends:GiB",
    "excluded_rows": "neuronhelpers.sweep.local:excluded_rows",
    "declared_vs_measured": "neuronhelpers.analysis.declared:declared_vs_measured",
    "disagreement_line": "neuronhelpers.analysis.declared:disagreement_line",
    "compile_cache": "neuronhelpers.run.compile_cache",
    "diff_results": "neuronhelpers.store.diff:diff_results",
    "release_steps": "neuronhelpers.store.diff:release_steps",
    "release_changes": "neuronhelpers.store.diff:release_changes",
    "change_counts": "neuronhelpers.store.diff:change_counts",
    "verdicts_per_pair": "neuronhelpers.store.dataset:verdicts_per_pair",
    "ranked_lines": "neuronhelpers.analysis.causes:ranked_lines",
    "check_expected": "neuronhelpers.store.diff:check_expected",
    "expected_frame": "neuronhelpers.store.diff:expected_frame",
    "write_card": "neuronhelpers.store.card:write_card",
    "render_card": "neuronhelpers.store.card:render_card",
    "publish": "neuronhelpers.store.publish:publish",
    "contribute": "neuronhelpers.store.publish:contribute",
    "published_source": "neuronhelpers.store.snapshot:published_source",
    "example_trainium_row": "neuronhelpers.store.example:example_trainium_row",
    "sweep_models": "neuronhelpers.sweep.local:sweep_models",
    "summary_frame": "neuronhelpers.sweep.local:summary_frame",
    "sweep_on_ray": "neuronhelpers.sweep.fleet:sweep_on_ray",
    "FleetReport": "neuronhelpers.sweep.fleet:FleetReport",
    "explore": "neuronhelpers.ui.explorer:explore",
    "doctor": "neuronhelpers.cli.doctor:main",
    "detect_backend": "neuronhelpers.core.backends:detect_backend",
    "get_backend": "neuronhelpers.core.backends:get_backend",
    "hub_reachable": "neuronhelpers.core.network:hub_reachable",
    "hub_status_line": "neuronhelpers.core.network:hub_status_line",
    "compiler_for": "neuronhelpers.core.versions:compiler_for",
    "UserError": "neuronhelpers.core.errors:UserError",
    "vocab": "neuronhelpers.core.vocab",
    "plots": "neuronhelpers.ui.plots",
    "settings": "neuronhelpers.core.settings",
    "workshop": "neuronhelpers.ui.workshop",
    "check_answer": "neuronhelpers.ui.exercises:check_answer",
}

__all__ = ["__version__", *EXPORTS]


def __getattr__(name: str):
    target = EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'neuronhelpers' has no attribute '{name}'")
    module, _, attribute = target.partition(":")
    value = import_module(module)
    value = getattr(value, attribute) if attribute else value
    globals()[name] = value  # once loaded, an ordinary attribute
    return value


def __dir__():
    return sorted(__all__)
