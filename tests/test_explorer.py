"""The explorer: view tables, summaries, sorting, filters and version pickers as pure functions, the widget wiring
them (driven as a person would: header clicks sort, a model's name opens its detail), rankings snapshots with
each model's architecture, files written by other tools, and escaping of every dataset string before it reaches
HTML."""

import base64
import datetime as dt
import re
import warnings

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import result_row
from neuronhelpers.core import vocab
from neuronhelpers.models import rankings
from neuronhelpers.models.selected import SELECTED
from neuronhelpers.store import dataset
from neuronhelpers.ui import explorer
from neuronhelpers.ui.explorer import Explorer, render_detail_html, sort_table, view_summary, view_table

XSS_SCRIPT = "<script>alert('pwned')</script>"
XSS_IMG = '<img src=x onerror="alert(1)">'
NEWEST = dict(compiler_version="2.13.0", library_version="5.23.0")
PAIR = "(inductor 2.13.0, transformers 5.23.0)"  # how an answer names NEWEST


def row(model_id, result="PASS", twin_of=None, minute=0, **overrides):
    values = dict(twin_of=twin_of, model_type=twin_of, run_py="print('hello')\n", requirements="torch==2.13.0\n",
                  packages="torch==2.13.0\npyarrow==26.0.1",
                  timestamp=dt.datetime(2026, 11, 30, 12, minute, tzinfo=dt.timezone.utc))
    if result == "UNTESTED":
        values.update(stage="twin", neuron_cores=None, wall_s=None, peak_memory_bytes=None)
    return result_row(model_id, result, **{**values, **overrides})


@pytest.fixture
def df(tmp_path):
    rows = [
        row("Qwen/Qwen3-0.6B", "PASS", wall_s=14.429868023000012, compile_s=9.87654, generate_s=0.4321,
            decode_tokens_per_s=71.234, neuron_sdk="2.27.0"),
        row("Qwen/Qwen3-0.6B", "FAIL", library_version="5.24.0", minute=5, cause="BackendCompilerFailed: x @ torch"),
        row("google/gemma-3-1b-it", "FAIL", cause="BackendCompilerFailed: x @ torch"),
        row("meta-llama/Llama-3.3-70B-Instruct", "PASS", neuron_cores=8, parallelism="tp", backend="neuron",
            compiler="neuronx-cc", neuronx_cc="2.13.0"),
        row("deepseek-ai/DeepSeek-V3", "EXCLUDED", error="incompatible: 671B parameters need far more than 16 cores"),
        row("tiny/llama", twin_of="llama", declared_fullgraph=True),
        row("tiny/gemma2", "FAIL", twin_of="gemma2", stage="run", cause="RuntimeError: cache shape @ transformers",
            declared_fullgraph=True),
        row("tiny/qwen3", twin_of="qwen3"),
        row("tiny/jamba", "UNTESTED", twin_of="jamba", error="its config cannot be shrunk", cause="twin: config"),
        row("tiny/llava", twin_of="llava", task="image-text-to-text"),
        row("tiny/bert", twin_of="bert", task="feature-extraction", library="sentence-transformers",
            library_version="5.1.0"),
        row("openai-community/gpt2", "PASS", compiler_version="2.12.0"),
    ]
    dataset.append_rows(tmp_path, rows)
    return dataset.load_results(tmp_path)


RANKINGS = pd.DataFrame([
    {"view": "trending", "task": "text-generation", "rank": 1, "model_id": "Qwen/Qwen3-0.6B", "model_type": "qwen3",
     "downloads": 1200},
    {"view": "trending", "task": "text-generation", "rank": 2, "model_id": "someone/untested-model",
     "model_type": "gemma2", "downloads": 45000},
    {"view": "trending", "task": "text-generation", "rank": 3, "model_id": "someone/other-qwen3", "model_type": "qwen3",
     "downloads": None},
    {"view": "trending", "task": "image-text-to-text", "rank": 1, "model_id": "llava-hf/llava-1.5-7b-hf",
     "model_type": "llava", "downloads": 7},
    {"view": "trending", "task": "feature-extraction", "rank": 1, "model_id": "sentence-transformers/all-MiniLM-L6-v2",
     "model_type": "bert", "downloads": 10},
    {"view": "downloads", "task": "text-generation", "rank": 1, "model_id": "openai-community/gpt2",
     "model_type": "gpt2", "downloads": 9_000_000},
])


def by_model(table):
    return table.set_index("model")


# ------------------------------------------------------------------------------------------------
# Pure functions
# ------------------------------------------------------------------------------------------------


def test_versions_are_newest_first_and_the_newest_pair_is_the_default(df):
    assert explorer.versions_available(df, "library_version", library="transformers") == ["5.24.0", "5.23.0"]
    assert explorer.versions_available(df, "library_version", library="sentence-transformers") == ["5.1.0"]
    assert explorer.versions_available(df, "compiler_version") == ["2.13.0", "2.12.0"]
    assert explorer.newest_pair(df, library="transformers") == ("2.13.0", "5.24.0")
    assert explorer.newest_pair(df.iloc[0:0]) is None


def test_selected_view_shows_results_untested_and_exclusions_without_cores(df):
    table = by_model(view_table("Selected", df, **NEWEST))
    assert table.at["Qwen/Qwen3-0.6B", "result"] == "PASS"
    assert table.at["Qwen/Qwen3-0.6B", "wall time (s)"] == 14.4  # rounded
    assert table.at["Qwen/Qwen3-0.6B", "compile (s)"] == 9.9 and table.at["Qwen/Qwen3-0.6B", "generate (s)"] == 0.43
    assert table.at["Qwen/Qwen3-0.6B", "decode (tok/s)"] == 71.2
    assert table.at["google/gemma-3-1b-it", "failed at"] == "compile"
    assert table.at["google/gemma-3-1b-it", "note"] == "BackendCompilerFailed: x @ torch"  # the cause of a FAIL
    assert table.at["Qwen/Qwen3-8B", "result"] == "untested"
    assert table.at["Qwen/Qwen3-8B", "architecture"] == "qwen3"
    assert table.at["meta-llama/Llama-3.1-8B-Instruct", "note"] == f"architecture twin tiny/llama {PAIR}: PASS (exact)"
    assert table.at["google/gemma-2-2b-it", "note"] == \
        f"architecture twin tiny/gemma2 {PAIR}: FAIL at run: RuntimeError: cache shape @ transformers"
    assert table.at["openai/gpt-oss-20b", "result"] == "EXCLUDED"
    assert table.at["openai/gpt-oss-20b", "note"] == "not a priority yet"
    # A recorded EXCLUDED row never shows a core count or timings: nothing ran.
    assert table.at["deepseek-ai/DeepSeek-V3", "result"] == "EXCLUDED"
    assert pd.isna(table.at["deepseek-ai/DeepSeek-V3", "cores"]) and pd.isna(
        table.at["deepseek-ai/DeepSeek-V3", "wall time (s)"])
    assert "far more than 16" in table.at["deepseek-ai/DeepSeek-V3", "note"]
    assert table.at["meta-llama/Llama-3.3-70B-Instruct", "cores"] == 8
    assert set(table["task"]) == {e.task for e in SELECTED}
    newer = by_model(view_table("Selected", df, compiler_version="2.13.0", library_version="5.24.0"))
    assert newer.at["Qwen/Qwen3-0.6B", "result"] == "FAIL"


def test_rankings_views_show_rank_downloads_task_and_twin_hints_never_as_results(df):
    trending = view_table("Trending", df, RANKINGS, task="text-generation", **NEWEST)
    assert list(trending.columns[:4]) == ["rank", "model", "downloads", "task"]
    assert list(trending.model) == ["Qwen/Qwen3-0.6B", "someone/untested-model", "someone/other-qwen3"]
    assert list(trending["rank"]) == [1, 2, 3] and trending.at[1, "downloads"] == 45000
    assert list(trending.result) == ["PASS", "untested", "untested"]
    assert trending.at[1, "note"] == (f"architecture twin tiny/gemma2 {PAIR}: FAIL at run: RuntimeError: "
                                      "cache shape @ transformers")
    assert trending.at[2, "note"] == f"architecture twin tiny/qwen3 {PAIR}: PASS (exact)"
    assert trending.at[0, "note"] == ""  # a tested model gets no hint
    assert list(view_table("Trending", df, RANKINGS, task="image-text-to-text").model) == ["llava-hf/llava-1.5-7b-hf"]
    embeddings = view_table("Trending", df, RANKINGS, task="feature-extraction", compiler_version="2.13.0",
                            library_version="5.1.0")
    assert embeddings.at[0, "note"] == \
        "architecture twin tiny/bert (inductor 2.13.0, sentence-transformers 5.1.0): PASS (exact)"
    downloads = view_table("Downloads", df, RANKINGS, compiler_version="2.12.0", library_version="5.23.0")
    assert list(downloads.result) == ["PASS"] and downloads.at[0, "downloads"] == 9_000_000


def test_architectures_view_lists_every_twin_with_result_stage_and_cause(df):
    archs = view_table("Architectures", df, **NEWEST)
    assert list(archs.model) == ["tiny/gemma2", "tiny/jamba", "tiny/llama", "tiny/llava", "tiny/qwen3"]
    table = by_model(archs)
    assert "cause" in archs.columns
    assert table.at["tiny/gemma2", "result"] == "FAIL" and table.at["tiny/gemma2", "failed at"] == "run"
    assert table.at["tiny/gemma2", "cause"] == "RuntimeError: cache shape @ transformers"
    # UNTESTED (a row, no verdict possible here) stays distinguishable from untested (no row) and from FAIL.
    assert table.at["tiny/jamba", "result"] == "UNTESTED (twin)"
    assert table.at["tiny/jamba", "note"] == "twin of jamba; its config cannot be shrunk"
    assert pd.isna(table.at["tiny/jamba", "cores"])
    # transformers' own claim beside the measured verdict: gemma2 declares fullgraph and fails; a row without the
    # column says nothing rather than 'no'.
    assert list(archs.columns).index("declares fullgraph") == list(archs.columns).index("evidence") + 1
    assert (table.at["tiny/gemma2", "declares fullgraph"], table.at["tiny/llama", "declares fullgraph"],
            table.at["tiny/jamba", "declares fullgraph"]) == ("yes", "yes", "")
    assert list(view_table("Architectures", df, name="GEMMA", compiler_version="2.13.0").model) == ["tiny/gemma2"]
    assert list(view_table("Architectures", df, task="image-text-to-text", compiler_version="2.13.0").model) == \
        ["tiny/llava"]
    # The library version applies to the task's library: the sentence-transformers twin shows with its own.
    assert list(view_table("Architectures", df, task="feature-extraction", compiler_version="2.13.0",
                           library_version="5.1.0").model) == ["tiny/bert"]


def test_summary_counts_untested_apart_from_fail_and_gives_the_pass_rate(df):
    archs = view_summary(view_table("Architectures", df, **NEWEST))
    assert (archs["PASS"], archs["FAIL"], archs["untested"], archs["untested_rows"]) == (3, 1, 1, 1)
    assert archs["pass_rate"] == 0.75
    selected = view_table("Selected", df, **NEWEST)
    summary = view_summary(selected)
    excluded = sum(bool(e.excluded) for e in SELECTED)
    assert summary["EXCLUDED"] == excluded and summary["PASS"] == 2 and summary["FAIL"] == 1
    assert summary["untested"] == len(selected) - 3 - excluded
    text = explorer.summary_text("Selected", summary)
    assert text.startswith(f"Selected: {len(selected)} models · 2 PASS · 1 FAIL · {excluded} EXCLUDED · ")
    assert text.endswith("pass rate 67% of 3 tested")
    html_text = explorer.render_summary_html("Architectures", view_table("Architectures", df, **NEWEST))
    assert "Pass rate by task" in html_text and "67% (2/3)" in html_text  # text-generation: 2 of 3


def test_a_pass_whose_check_could_not_have_failed_is_counted_apart_and_left_out_of_the_pass_rate(df):
    """PASS counts only checks that could fail; an insensitive_check PASS is shown beside it, and neither the pass rate
    nor the tested count nor the per-family rate takes it."""
    table = view_table("Architectures", df, **NEWEST)
    first = table.index[table["result"].eq("PASS")][0]
    table.loc[first, "evidence"] = "insensitive_check"
    summary = view_summary(table)
    assert (summary["PASS"], summary[explorer.PASS_COULD_NOT_FAIL], summary["FAIL"]) == (2, 1, 1)
    assert summary["tested"] == 3 and round(summary["pass_rate"], 3) == 0.667
    text = explorer.summary_text("Architectures", summary)
    assert " · 2 PASS · 1 PASS whose check could not have failed · 1 FAIL · " in text
    rates = explorer.family_pass_rates(table, "task").set_index("family")
    assert int(rates["tested"].sum()) == 3


def test_sorting_by_any_column(df):
    table = view_table("Architectures", df, **NEWEST)
    assert list(sort_table(table, "result").result) == ["PASS", "PASS", "PASS", "FAIL", "UNTESTED (twin)"]
    assert list(sort_table(table, "model", ascending=False).model)[:2] == ["tiny/qwen3", "tiny/llava"]
    walls = sort_table(table, "wall time (s)", ascending=False)["wall time (s)"]
    assert walls.isna().tolist()[-1]  # empty cells last either way
    assert list(sort_table(table, "failed at").model)[0] == "tiny/gemma2"
    with pytest.raises(ValueError, match="no column"):
        sort_table(table, "nope")


def test_detail_has_the_reproduce_line_downloads_sdk_and_rounded_history(df):
    detail = explorer.model_detail(df, "Qwen/Qwen3-0.6B", **NEWEST)
    assert detail["reproduce"] == "neuronhelpers run Qwen/Qwen3-0.6B --backend cpu"
    assert detail["sdk"]["Neuron SDK"] == "2.27.0"
    history = detail["history"]
    assert list(history["wall time (s)"].dropna()) == [14.4, 12.5]
    html_text = render_detail_html(detail)
    assert "14.429868" not in html_text and "14.4" in html_text
    for downloaded, text in (("run.py", "print('hello')\n"), ("requirements.txt", "torch==2.13.0\n")):
        match = re.search(f'download="{re.escape(downloaded)}" '
                          'href="data:[^;]+;charset=utf-8;base64,([^"]+)"', html_text)
        assert match and base64.b64decode(match.group(1)).decode() == text
    assert 'class="nh-runpy nh-scroll' in html_text and "max-height:320px" in html_text
    assert "Neuron SDK" in html_text and "2.27.0" in html_text and "9.9 s" in html_text and "71.2 tokens/s" in html_text
    sharded = explorer.model_detail(df, "meta-llama/Llama-3.3-70B-Instruct", **NEWEST)
    assert sharded["reproduce"] == "neuronhelpers run meta-llama/Llama-3.3-70B-Instruct --cores 8"
    assert explorer.model_detail(df, "deepseek-ai/DeepSeek-V3")["reproduce"] == \
        "neuronhelpers run deepseek-ai/DeepSeek-V3 --backend cpu"  # excluded: no core count
    failed = render_detail_html(explorer.model_detail(df, "tiny/gemma2", **NEWEST))
    assert failed.index("Cause:") < failed.index("run.py")  # the cause comes before the script
    assert "FAIL</span></h3>" in failed  # no verification for a FAIL


def test_detail_of_a_row_with_missing_texts_renders(tmp_path):
    dataset.append_rows(tmp_path, [row("tiny/gemma2", "FAIL", twin_of="gemma2", requirements=None, run_py=None)])
    detail = explorer.model_detail(dataset.load_results(tmp_path), "tiny/gemma2")
    html_text = render_detail_html(detail)
    assert "none recorded" in html_text and "BackendCompilerFailed: x" in html_text
    assert "Neuron SDK</th><td>not recorded" in html_text


def test_detail_of_an_untested_model_says_so_with_the_hint_and_how_to_test_it():
    text = render_detail_html(None, "someone/model", hint="architecture twin tiny/qwen3: PASS")
    assert "Not tested yet" in text and "Hint, not its result" in text and "neuronhelpers run someone/model" in text


def test_the_public_bucket_is_offered_only_for_neuron_rows():
    """"The explorer's detail pane offers the public bucket's command only for neuron rows (today it offers
    .../torch-neuronx-neff-cache/inductor-2.13.0 for an inductor row)"; its strings stay escaped."""
    df = pd.DataFrame([row("tiny/qwen3", backend="neuron", compiler="neuronx-cc", compiler_version="2.28.7631.0"),
                       row("tiny/llama", backend="cuda", compiler="inductor", compiler_version="2.13.0"),
                       row("tiny/gpt2", backend="neuron", compiler="neuronx-cc", compiler_version=XSS_SCRIPT)])
    neuron = explorer.model_detail(df, "tiny/qwen3")
    assert neuron["sync_command"] == ("hf buckets sync hf://buckets/aws-neuron/torch-neuronx-neff-cache/"
                                      "neuronxcc-2.28.7631.0 ${TORCH_NEURONX_NEFF_CACHE_DIR:-/tmp/neff_cache}")
    assert neuron["sync_command"] in render_detail_html(neuron)
    inductor = explorer.model_detail(df, "tiny/llama")
    assert inductor["sync_command"] is None
    assert inductor["local_cache_command"] == ("export TORCHINDUCTOR_CACHE_DIR=${NEURONHELPERS_HOME:-~/.cache/"
                                               "neuronhelpers}/compile-cache/cuda/inductor-2.13.0")
    pane = render_detail_html(inductor)
    assert "hf://buckets/" not in pane and "The public bucket holds Neuron (neuronx-cc) caches only" in pane
    assert "<script>" not in render_detail_html(explorer.model_detail(df, "tiny/gpt2"))


# ------------------------------------------------------------------------------------------------
# A results file written by another tool
# ------------------------------------------------------------------------------------------------


def write_foreign(folder, name="other-tool.parquet", result_value="COMPILED"):
    table = pa.table({
        "model_id": ["Qwen/Qwen3-0.6B", "meta-llama/Llama-3.2-1B-Instruct", "someone/model"],
        "neuronx_cc": ["2.21.18209.0"] * 3, "library": ["transformers"] * 3, "library_version": ["4.57.1"] * 3,
        "neuron_cores": [1, 2, 1], "result": ["PASS", result_value, "FAIL"],
        "error": [None, None, "RuntimeError: boom"],
    })
    path = folder / "data" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def test_a_foreign_results_file_is_shown_with_one_notice_naming_it(tmp_path):
    path = write_foreign(tmp_path)
    with pytest.warns(dataset.DatasetWarning, match="COMPILED"):
        df = dataset.load_results(tmp_path)
    table = by_model(view_table("Selected", df, compiler_version="2.21.18209.0", library_version="4.57.1"))
    assert table.at["Qwen/Qwen3-0.6B", "result"] == "PASS"
    assert table.at["meta-llama/Llama-3.2-1B-Instruct", "result"] == "COMPILED"  # kept as recorded
    assert table.at["meta-llama/Llama-3.2-1B-Instruct", "cores"] == 2
    assert view_summary(view_table("Selected", df, compiler_version="2.21.18209.0"))["other"] == 1
    detail = explorer.model_detail(df, "meta-llama/Llama-3.2-1B-Instruct")
    assert detail["sdk"]["compiler"] == "neuronx-cc 2.21.18209.0" and "COMPILED" in render_detail_html(detail)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # explore() names the file in the page, not as a second warning
        ui = explorer.explore(str(tmp_path), RANKINGS)
    assert ui.compiler.value == "2.21.18209.0" and ui.library.value == "4.57.1"
    assert ui.notice_html.value.count(str(path)) == 1 and "outside the neuronhelpers vocabulary" in ui.notice_html.value
    assert "COMPILED" in ui.page_text() and "1 other results" in ui.summary_html.value
    # Plain pandas columns only (no loader): missing columns are null, nothing crashes.
    raw = pd.read_parquet(path)
    assert by_model(view_table("Selected", raw, compiler_version="2.21.18209.0")).at[
        "Qwen/Qwen3-0.6B", "result"] == "PASS"
    assert explorer.model_detail(raw, "someone/model")["error"] == "RuntimeError: boom"


# ------------------------------------------------------------------------------------------------
# The widget
# ------------------------------------------------------------------------------------------------


def test_widget_is_driven_like_a_person_would(df):
    ui = Explorer(df, RANKINGS)
    assert ui.library.value == "5.24.0" and ui.compiler.value == "2.13.0"  # the newest pair by default
    assert ui.library.description == "transformers" and ui.library.style.description_width == "initial"
    assert "Qwen/Qwen3-0.6B" in ui.page_text() and "FAIL" in ui.page_text()
    assert ui.summary_html.value.count("Selected: ") == 1 and "EXCLUDED" in ui.summary_html.value
    ui.view.value = "Architectures"
    ui.library.value = "5.23.0"
    ui.name.value = "lla"
    assert "tiny/llama" in ui.page_text() and "tiny/llava" in ui.page_text()
    assert "tiny/gemma2" not in ui.page_text()
    ui.task.value = "image-text-to-text"
    assert "tiny/llama" not in ui.page_text() and "tiny/llava" in ui.page_text()
    ui.model.value = "tiny/llava"
    detail = ui.detail_html.value
    assert "tiny/llava" in detail and "run.py" in detail and "torch==2.13.0" in detail
    assert "hf://buckets/" not in detail and "Neuron (neuronx-cc) caches only" in detail  # an inductor row
    assert "compile-cache/cpu/inductor-2.13.0" in detail  # its local cache, one folder per torch version
    assert "All 2 installed packages" in detail and "pyarrow==26.0.1" in detail
    # Trending and Downloads show one task at a time; Selected may show all.
    ui.view.value = "Trending"
    assert "" not in [value for _, value in ui.task.options] and ui.task.value == "image-text-to-text"
    assert list(ui.table.model) == ["llava-hf/llava-1.5-7b-hf"]  # the name filter stays
    assert f"architecture twin tiny/llava {PAIR}: PASS (exact)" in ui.page_text()
    ui.name.value = ""
    ui.task.value = "text-generation"
    ui.library.value = "5.24.0"
    assert "someone/untested-model" in ui.page_text() and "untested" in ui.page_text()
    assert ui.page_text().splitlines()[0].startswith("rank | model | downloads | task")
    ui.model.value = "Qwen/Qwen3-0.6B"
    assert "BackendCompilerFailed: x" in ui.detail_html.value  # the error of the chosen version
    assert "5.23.0" in ui.detail_html.value  # its history across versions
    ui.view.value = "Selected"
    assert ui.task.value == "text-generation" and ("all tasks", "") in ui.task.options


def test_task_picker_offers_every_task_and_the_library_picker_follows_it(df):
    ui = Explorer(df, RANKINGS)
    assert [value for _, value in ui.task.options] == ["", *vocab.TASKS]
    ui.view.value = "Architectures"
    ui.task.value = "feature-extraction"
    assert ui.library.description == "sentence-transformers" and ui.library.options == ("5.1.0",)
    assert "tiny/bert" in ui.page_text() and "tiny/llama" not in ui.page_text()
    ui.task.value = "text-to-image"
    assert ui.library.description == "diffusers" and ui.library.value is None
    assert "Architectures: 0 models" in ui.summary_html.value
    ui.task.value = "text-generation"
    assert ui.library.description == "transformers" and ui.library.value == "5.24.0"  # the newest again


def test_header_clicks_sort_and_a_name_click_opens_the_detail(df):
    ui = Explorer(df, RANKINGS)
    ui.view.value = "Architectures"
    ui.library.value = "5.23.0"
    ui._headers["result"].click()
    assert ui._headers["result"].description == "result ▲"
    assert [m for m in ui.table.model][-1] == "tiny/jamba"  # UNTESTED after PASS and FAIL
    ui._headers["result"].click()
    assert ui._headers["result"].description == "result ▼" and ui.table.model.iloc[0] == "tiny/jamba"
    ui._headers["model"].click()
    # every task: the sentence-transformers twin is listed too, at its own library's newest version
    assert list(ui.table.model)[:3] == ["tiny/bert", "tiny/gemma2", "tiny/jamba"]
    assert ui._headers["result"].description == "result"
    ui.name_buttons()[2].click()  # the third row's name
    assert ui.model.value == "tiny/jamba" and "UNTESTED (twin)" in ui.detail_html.value
    assert "its config cannot be shrunk" in ui.detail_html.value
    ui.view.value = "Trending"
    ui.task.value = "text-generation"
    ui.name_buttons()[1].click()  # an untested Hub model: the twin's verdict as a hint
    assert ui.model.value == "someone/untested-model"
    assert "Not tested yet" in ui.detail_html.value and f"tiny/gemma2 {PAIR}: FAIL at run" in ui.detail_html.value


def test_a_long_view_is_paged(df):
    ui = Explorer(df, RANKINGS, page_size=10)
    total = len(ui.table)
    assert ui.pager.layout.display == "flex" and ui.page_label.value == f"rows 1–10 of {total}"
    assert ui.prev_page.disabled and not ui.next_page.disabled
    first = ui.page_text()
    ui.next_page.click()
    assert ui.page_label.value == f"rows 11–20 of {total}" and ui.page_text() != first
    ui.name.value = "qwen"  # a filter starts again at the first page
    assert ui.pager.layout.display == "none"


def test_the_static_copy_says_why_the_widget_did_not_render(df):
    ui = Explorer(df, RANKINGS)
    static = explorer.render_static_html("Selected", ui.table)
    assert 'class="nh-static"' in static and "did not render here" in static and "Qwen/Qwen3-0.6B" in static
    assert ".nh-static{display:none}" in ui.widget.children[0].value  # hidden wherever the widget renders
    assert ".nh-static{display:none}" not in static


def test_dataset_strings_are_escaped_in_every_html_the_widget_renders(tmp_path):
    evil = [row(f"evil/{XSS_SCRIPT}", "FAIL", error=XSS_IMG, run_py=f"# {XSS_SCRIPT}\nx = '{XSS_IMG}'\n",
                requirements=XSS_IMG, twin_of=XSS_SCRIPT, traceback=XSS_SCRIPT, cause=XSS_IMG, neuron_sdk=XSS_IMG)]
    dataset.append_rows(tmp_path, evil)
    write_foreign(tmp_path, name='<img src=x onerror="alert(1)">.parquet', result_value=XSS_SCRIPT)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dataset.DatasetWarning)
        df = dataset.load_results(tmp_path)
    ui = Explorer(df, RANKINGS)
    ui.view.value = "Architectures"
    ui.compiler.value = "2.13.0"
    ui.library.value = "5.23.0"
    ui.model.value = f"evil/{XSS_SCRIPT}"
    texts = [ui.detail_html.value, ui.summary_html.value, ui.notice_html.value,
             *[c.value for c in ui.grid.children if hasattr(c, "value")]]
    for html_text in texts:
        assert "<script>" not in html_text and "<img" not in html_text
    assert "&lt;img" in ui.notice_html.value and "&lt;script&gt;" in ui.page_text()
    assert "&lt;img" in ui.detail_html.value
    ui.view.value = "Selected"
    ui.compiler.value = "2.21.18209.0"
    ui.library.value = "4.57.1"
    assert "&lt;script&gt;" in ui.page_text() and "<script>" not in ui.page_text()
    assert "<script>" not in explorer.render_static_html("Selected", ui.table)


# ------------------------------------------------------------------------------------------------
# Rankings
# ------------------------------------------------------------------------------------------------


def test_the_shipped_sample_is_labelled_and_carries_every_models_architecture(tmp_path):
    sample = rankings.load_rankings(tmp_path / "none")
    assert sample.attrs["source"] == "sample" and "sample" in rankings.ranking_label(sample)
    assert "2026-11-30" in rankings.ranking_label(sample)
    assert set(sample.view) == {"trending", "downloads"} and set(sample.task) == set(vocab.TASKS)
    assert sample["model_type"].notna().all()
    types = dict(zip(sample.model_id, sample.model_type, strict=True))
    assert types["Qwen/Qwen3-0.6B"] == "qwen3" and types["llava-hf/llava-1.5-7b-hf"] == "llava"


def test_fetch_rankings_asks_for_each_models_config_in_the_listing(tmp_path):
    from huggingface_hub.hf_api import ModelInfo

    calls = []

    class StandInApi:  # a recorded HfApi.list_models: real ModelInfo objects, as the Hub's listing returns them
        def list_models(self, *, pipeline_tag, sort, limit, expand):
            calls.append({"pipeline_tag": pipeline_tag, "sort": sort, "limit": limit, "expand": expand})
            config = ({"diffusers": {"_class_name": "FluxPipeline" if sort == "downloads" else "NewPipeline"}}
                      if pipeline_tag == "text-to-image"
                      else {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"})
            return [ModelInfo(id=f"{pipeline_tag}/{sort}-{i}", downloads=i, trendingScore=i, likes=0,
                              pipeline_tag=pipeline_tag, config=config if i else None) for i in range(3)]

    fresh = rankings.fetch_rankings(api=StandInApi(), limit=3)
    assert {c["sort"] for c in calls} == {"trending_score", "downloads"} and len(calls) == 2 * len(vocab.TASKS)
    for call in calls:
        assert {"config", "pipeline_tag", "downloads", "trendingScore"} <= set(call["expand"])
    assert len(fresh) == 3 * len(calls)
    assert list(fresh[fresh.view == "downloads"].model_id[:1]) == ["text-generation/downloads-0"]
    first = fresh[(fresh.view == "trending") & (fresh.task == "text-generation")]
    assert first.model_type.isna().tolist() == [True, False, False] and first.model_type.iloc[1] == "qwen3"
    # the denoiser's model type, if known
    assert set(fresh[fresh.task == "text-to-image"].model_type.dropna()) == {"flux", "NewPipeline"}
    rankings.save_snapshot(fresh, tmp_path)
    loaded = rankings.load_rankings(tmp_path)
    assert loaded.attrs["source"] == "hub" and len(loaded) == len(fresh)
    assert list(loaded[(loaded.view == "trending") & (loaded.task == "text-generation")].model_type[1:]) == (
        ["qwen3"] * 2)


def test_an_older_snapshot_without_architectures_still_loads(tmp_path):
    (tmp_path / "rankings-2026-01-01.json").write_text(
        '{"date": "2026-01-01", "rows": [{"view": "trending", "task": "text-generation", "rank": 1, '
        '"model_id": "a/b"}]}')
    frame = rankings.load_rankings(tmp_path)
    assert frame.attrs["date"] == "2026-01-01" and frame["model_type"].isna().all()
    assert list(view_table("Trending", pd.DataFrame({"model_id": [], "result": []}), frame,
                           task="text-generation").result) == ["untested"]


def test_rankings_command_says_which_rankings_are_used_and_refuses_quietly_offline():
    from conftest import run_cli

    shown = run_cli("rankings")
    assert shown.returncode == 0 and shown.stdout.startswith("sample rankings shipped with neuronhelpers (2026-11-30)")
    refresh = run_cli("rankings", "--refresh", env={"HF_HUB_OFFLINE": "1"})
    assert refresh.returncode == 1 and refresh.stderr.count("\n") == 1
    assert "could not refresh the rankings (OfflineModeIsEnabled)" in refresh.stderr


def test_a_notebook_exported_to_html_offline_says_why_the_explorer_is_not_interactive(tmp_path):
    import nbformat
    from nbclient import NotebookClient
    from nbconvert import HTMLExporter

    folder = tmp_path / "results"
    dataset.append_rows(folder, [row("tiny/llama", twin_of="llama")])
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        f"from neuronhelpers.ui.explorer import explore\nexplore({str(folder)!r})")])
    NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    outputs = nb.cells[0].outputs
    assert [sorted(o.data) for o in outputs] == [["application/vnd.jupyter.widget-view+json", "text/plain"],
                                                  ["text/html", "text/plain"]]
    page, _ = HTMLExporter().from_notebook_node(nb)
    assert "The interactive explorer did not render here" in page and "tiny/llama" in page


def test_a_model_twin_answers_for_its_model_before_the_architecture_twin(df, tmp_path):
    """An untested Hub id is hinted with its own twin's verdict (tiny/<org>--<name>, labelled model twin), else its
    architecture twin's; the Architectures view lists architecture twins only, and its Trainium column reads each
    model's own twin where one exists."""
    own = row("tiny/meta-llama--Llama-3.1-8B-Instruct", "FAIL", twin_of="llama", minute=9, stage="compile",
              cause="FailOnRecompileLimitHit: cumulative_length_int", twin_from="meta-llama/Llama-3.1-8B-Instruct",
              config_source="hub:meta-llama/Llama-3.1-8B-Instruct@0123abc")
    dataset.append_rows(tmp_path / "more", [own])
    rows = pd.concat([df, dataset.load_results(tmp_path / "more")], ignore_index=True)
    table = by_model(view_table("Selected", rows, **NEWEST))
    assert table.at["meta-llama/Llama-3.1-8B-Instruct", "note"] == (
        f"model twin tiny/meta-llama--Llama-3.1-8B-Instruct {PAIR}: FAIL at compile: FailOnRecompileLimitHit: "
        "cumulative_length_int; its own twin, from its config as the Hub has it "
        "(meta-llama/Llama-3.1-8B-Instruct@0123abc); architecture twin tiny/llama in the same pair: PASS (exact)")
    assert table.at["meta-llama/Llama-3.2-1B-Instruct", "note"] == f"architecture twin tiny/llama {PAIR}: PASS (exact)"
    architectures = view_table("Architectures", rows, **NEWEST)
    assert "tiny/meta-llama--Llama-3.1-8B-Instruct" not in set(architectures.model)
    assert "tiny/llama" in set(architectures.model)
