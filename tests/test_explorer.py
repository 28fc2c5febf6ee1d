"""The explorer: view tables, filters and version pickers as pure functions, the widget wiring them,
rankings snapshots, and escaping of every dataset string before it reaches HTML."""

import datetime as dt
from types import SimpleNamespace

import pandas as pd
import pytest

from conftest import result_row
from neuronhelpers import dataset, explorer, hub
from neuronhelpers.explorer import Explorer, render_detail_html, view_table

XSS_SCRIPT = "<script>alert('pwned')</script>"
XSS_IMG = '<img src=x onerror="alert(1)">'


def row(model_id, result="PASS", twin_of=None, minute=0, **overrides):
    values = dict(twin_of=twin_of, model_type=twin_of, run_py="print('hello')\n", requirements="torch==2.13.0\n",
                  packages="torch==2.13.0\npyarrow==26.0.1",
                  timestamp=dt.datetime(2026, 11, 30, 12, minute, tzinfo=dt.timezone.utc))
    return result_row(model_id, result, **{**values, **overrides})


@pytest.fixture
def df(tmp_path):
    rows = [
        row("Qwen/Qwen3-0.6B", "PASS"),
        row("Qwen/Qwen3-0.6B", "FAIL", library_version="5.24.0", minute=5),
        row("google/gemma-3-1b-it", "FAIL"),
        row("tiny/llama", twin_of="llama"),
        row("tiny/gemma2", "FAIL", twin_of="gemma2"),
        row("tiny/llava", twin_of="llava", task="image-text-to-text"),
        row("openai-community/gpt2", "PASS", compiler_version="2.12.0"),
    ]
    dataset.append_rows(tmp_path, rows)
    return dataset.load_results(tmp_path)


RANKINGS = pd.DataFrame([
    {"view": "trending", "task": "text-generation", "rank": 1, "model_id": "Qwen/Qwen3-0.6B"},
    {"view": "trending", "task": "text-generation", "rank": 2, "model_id": "someone/untested-model"},
    {"view": "trending", "task": "image-text-to-text", "rank": 1, "model_id": "llava-hf/llava-1.5-7b-hf"},
    {"view": "downloads", "task": "text-generation", "rank": 1, "model_id": "openai-community/gpt2"},
])


def test_versions_are_newest_first(df):
    assert explorer.versions_available(df, "library_version") == ["5.24.0", "5.23.0"]
    assert explorer.versions_available(df, "compiler_version") == ["2.13.0", "2.12.0"]


def test_selected_view_shows_results_untested_and_exclusions(df):
    table = view_table("Selected", df, compiler_version="2.13.0", library_version="5.23.0").set_index("model")
    assert table.at["Qwen/Qwen3-0.6B", "result"] == "PASS"
    assert table.at["google/gemma-3-1b-it", "failed at"] == "compile"
    assert table.at["Qwen/Qwen3-8B", "result"] == "untested"
    assert table.at["meta-llama/Llama-3.1-8B-Instruct", "note"] == "architecture twin tiny/llama: PASS"
    assert table.at["openai/gpt-oss-20b", "result"] == "EXCLUDED"
    assert table.at["openai/gpt-oss-20b", "note"] == "not a priority yet"
    newer = view_table("Selected", df, compiler_version="2.13.0", library_version="5.24.0").set_index("model")
    assert newer.at["Qwen/Qwen3-0.6B", "result"] == "FAIL"


def test_rankings_views_list_models_tested_or_not_one_task_at_a_time(df):
    trending = view_table("Trending", df, RANKINGS, task="text-generation", compiler_version="2.13.0",
                          library_version="5.23.0")
    assert list(trending.model) == ["Qwen/Qwen3-0.6B", "someone/untested-model"]
    assert list(trending.result) == ["PASS", "untested"]
    assert list(view_table("Trending", df, RANKINGS, task="image-text-to-text").model) == ["llava-hf/llava-1.5-7b-hf"]
    downloads = view_table("Downloads", df, RANKINGS, compiler_version="2.12.0", library_version="5.23.0")
    assert list(downloads.result) == ["PASS"]


def test_architectures_view_and_the_name_filter(df):
    archs = view_table("Architectures", df, compiler_version="2.13.0", library_version="5.23.0")
    assert list(archs.model) == ["tiny/gemma2", "tiny/llama", "tiny/llava"]
    assert list(view_table("Architectures", df, name="GEMMA", compiler_version="2.13.0").model) == ["tiny/gemma2"]
    assert list(view_table("Architectures", df, task="image-text-to-text", compiler_version="2.13.0").model) == ["tiny/llava"]


def test_widget_is_driven_like_a_person_would(df):
    ui = Explorer(df, RANKINGS)
    assert ui.library.value == "5.24.0" and ui.compiler.value == "2.13.0"  # newest by default
    assert "Qwen/Qwen3-0.6B" in ui.table_html.value and "FAIL" in ui.table_html.value
    ui.view.value = "Architectures"
    ui.library.value = "5.23.0"
    ui.name.value = "lla"
    assert "tiny/llama" in ui.table_html.value and "tiny/llava" in ui.table_html.value
    assert "tiny/gemma2" not in ui.table_html.value
    ui.task.value = "image-text-to-text"
    assert "tiny/llama" not in ui.table_html.value and "tiny/llava" in ui.table_html.value
    ui.model.value = "tiny/llava"
    detail = ui.detail_html.value
    assert "tiny/llava" in detail and "run.py" in detail and "torch==2.13.0" in detail
    assert "hf buckets sync hf://buckets/" in detail and "inductor-2.13.0" in detail
    assert "All 2 installed packages" in detail and "pyarrow==26.0.1" in detail
    ui.view.value = "Trending"
    assert "tiny/" not in ui.table_html.value  # the name filter stays: nothing trending matches "lla"
    ui.name.value = ""
    ui.task.value = "text-generation"
    ui.library.value = "5.24.0"
    assert "someone/untested-model" in ui.table_html.value and "untested" in ui.table_html.value
    ui.model.value = "Qwen/Qwen3-0.6B"
    assert "BackendCompilerFailed: x" in ui.detail_html.value  # the error of the chosen version
    assert "5.23.0" in ui.detail_html.value  # its history across versions


def test_dataset_strings_are_escaped_in_every_html_the_widget_renders(tmp_path):
    evil = [row(f"evil/{XSS_SCRIPT}", "FAIL", error=XSS_IMG, run_py=f"# {XSS_SCRIPT}\nx = '{XSS_IMG}'\n",
                requirements=XSS_IMG, twin_of=XSS_SCRIPT, traceback=XSS_SCRIPT)]
    dataset.append_rows(tmp_path, evil)
    df = dataset.load_results(tmp_path)
    ui = Explorer(df, RANKINGS)
    ui.view.value = "Architectures"
    ui.model.value = f"evil/{XSS_SCRIPT}"
    for html_text in (ui.table_html.value, ui.detail_html.value):
        assert "<script>" not in html_text and "<img" not in html_text
    assert "&lt;script&gt;" in ui.table_html.value and "&lt;img" in ui.detail_html.value


def test_detail_of_a_row_with_missing_texts_renders(tmp_path):
    dataset.append_rows(tmp_path, [row("tiny/gemma2", "FAIL", twin_of="gemma2", requirements=None, run_py=None)])
    detail = explorer.model_detail(dataset.load_results(tmp_path), "tiny/gemma2")
    html_text = render_detail_html(detail)
    assert "none recorded" in html_text and "BackendCompilerFailed: x" in html_text


def test_detail_of_an_untested_model_says_so():
    assert "not tested yet" in render_detail_html(None, "someone/model")


def test_rankings_snapshot_roundtrip_and_sample_fallback(tmp_path):
    sample = hub.load_rankings(tmp_path / "none")
    assert sample.attrs["source"] == "sample" and "sample" in hub.ranking_label(sample)
    assert set(sample.view) == {"trending", "downloads"} and set(sample.task) == set(hub.TASKS)

    class StandInApi:  # the shape of HfApi.list_models' answers
        def list_models(self, pipeline_tag, sort, limit):
            assert sort in ("trending_score", "downloads")
            return [SimpleNamespace(id=f"{pipeline_tag}/{sort}-{i}", downloads=i, trending_score=i, likes=0) for i in range(3)]

    fresh = hub.fetch_rankings(api=StandInApi(), limit=3)
    assert len(fresh) == 12 and list(fresh[fresh.view == "downloads"].model_id[:1]) == ["text-generation/downloads-0"]
    hub.save_snapshot(fresh, tmp_path)
    loaded = hub.load_rankings(tmp_path)
    assert loaded.attrs["source"] == "hub" and len(loaded) == 12


def test_rankings_command_says_which_rankings_are_used_and_refuses_quietly_offline():
    from conftest import run_cli

    shown = run_cli("rankings")
    assert shown.returncode == 0 and shown.stdout.startswith("sample rankings shipped with neuronhelpers (2026-11-30)")
    refresh = run_cli("rankings", "--refresh", env={"HF_HUB_OFFLINE": "1"})
    assert refresh.returncode == 1 and refresh.stderr.count("\n") == 1
    assert "could not refresh the rankings (OfflineModeIsEnabled)" in refresh.stderr
