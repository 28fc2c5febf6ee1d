"""Model twins (neuronhelpers.twins.own): a Hub model's own config shrunk in its sizes only, read from a folder, the
Hub (through huggingface_hub: a local Hub here) or the corpus shipped in the package (neuronhelpers.twins.corpus),
whose provenance is checked file by file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from huggingface_hub import constants as hf_constants

from conftest import run_cli
from hub_server import EMPTY_AGENT_REGISTRY, HubServer
from neuronhelpers.core.errors import UserError
from neuronhelpers.core.settings import SHELF_ENV
from neuronhelpers.core.vocab import FEATURE_EXTRACTION, TEXT_GENERATION
from neuronhelpers.models.rankings import load_rankings
from neuronhelpers.models.selected import SELECTED
from neuronhelpers.twins import build
from neuronhelpers.twins.corpus import SOURCE_FILE, corpus_root, folder_name, model_id_of, records, sha256
from neuronhelpers.twins.own import (
    READ_CORPUS,
    READ_HUB,
    READ_SHELF,
    config_changes,
    corpus_twins,
    experts_for,
    model_twin_spec,
    own_table,
    twin_id_for,
    unkept,
)

# A Phi-3 config as Microsoft's Phi-3.5-mini-instruct sets the fields that shape the graph (trimmed: sizes aside).
PHI3 = {
    "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_size": 3072, "intermediate_size": 8192,
    "num_attention_heads": 32, "num_key_value_heads": 32, "num_hidden_layers": 32, "vocab_size": 32064,
    "max_position_embeddings": 131072, "original_max_position_embeddings": 4096, "sliding_window": 262144,
    "rope_theta": 10000.0, "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 32000,
    "rope_scaling": {"type": "longrope", "short_factor": [1.0 + i / 100 for i in range(48)],
                     "long_factor": [1.0 + i / 10 for i in range(48)]},
}
GEMMA3_TEXT = {
    "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 1152,
    "intermediate_size": 6912, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
    "num_hidden_layers": 26, "vocab_size": 262144, "sliding_window": 512, "sliding_window_pattern": 6,
    "final_logit_softcapping": None, "attn_logit_softcapping": None, "query_pre_attn_scalar": 256,
    "rope_theta": 1000000, "rope_local_base_freq": 10000, "max_position_embeddings": 32768,
}
QWEN3_MOE = {
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144,
    "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8, "norm_topk_prob": True,
    "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "num_hidden_layers": 48,
    "vocab_size": 151936, "decoder_sparse_step": 1, "mlp_only_layers": [], "max_position_embeddings": 40960,
}


def _folder(tmp_path, name, config) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return folder


# ---- the corpus ----------------------------------------------------------------------------------------------------

def test_every_corpus_file_is_the_copy_its_source_names():
    """Each file of the corpus is listed in its model's SOURCE.json with the public repository, path and commit (or
    package) it was copied from, the date read and the form found; its bytes still have the recorded sha256; a
    model without a config says why."""
    assert records(), "the corpus is empty"
    for model_id, record in records().items():
        folder = Path(record["folder"])
        assert folder.name == folder_name(model_id) and model_id_of(folder.name) == model_id
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", record["read"]), model_id
        on_disk = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.name != SOURCE_FILE}
        assert on_disk == set(record["files"]), f"{model_id}: files without a source, or sources without a file"
        if not record["files"]:
            assert record.get("note"), f"{model_id}: no config and no note saying why"
        for name, source in record["files"].items():
            assert sha256((folder / name).read_bytes()) == source["sha256"], f"{model_id}/{name} changed"
            assert source["form"] in ("json file", "json string", "python literal", "package file", "hub page"), source
            if source["form"] == "package file":
                assert re.fullmatch(r"[\w.-]+==[\w.+-]+", source["package"]), source
            else:
                assert re.fullmatch(r"[\w.-]+/[\w.-]+", source["repo"]) and source["path"], source
                assert re.fullmatch(r"[0-9a-f]{40}", source["commit"]), source
            if name.endswith("config.json"):
                json.loads((folder / name).read_text())  # a config the corpus holds parses


def test_the_selected_list_and_the_rankings_sample_are_in_the_corpus():
    """Every model of the Selected list and of the rankings sample has a corpus entry: its config, or why not."""
    wanted = {entry.model_id for entry in SELECTED} | set(load_rankings().model_id)
    assert wanted - set(records()) == set()


# ---- the shrink keeps what shapes the graph ------------------------------------------------------------------------

def test_a_model_twin_keeps_its_window_and_its_rope_scaling(tmp_path):
    """Phi-3.5's sliding window and longrope survive the shrink (the per-frequency factors resized to the twin's
    head, first and last kept); the sizes shrink and are listed as the changes."""
    spec = model_twin_spec(str(_folder(tmp_path, "phi35", PHI3)))
    folder = build.build_twin(spec, isolated=False)
    twin = json.loads((folder / "config.json").read_text())
    assert twin["sliding_window"] == 262144
    rope = twin["rope_parameters"]
    assert rope["rope_type"] == "longrope" and rope["original_max_position_embeddings"] == 4096
    assert len(rope["short_factor"]) == twin["hidden_size"] // twin["num_attention_heads"] // 2
    assert rope["long_factor"][0] == 1.0 and rope["long_factor"][-1] == PHI3["rope_scaling"]["long_factor"][-1]
    record = json.loads((folder / "TWIN.json").read_text())
    assert record["twin_from"] == str((tmp_path / "phi35").resolve()) and record["twin_of"] == "phi3"
    assert "hidden_size 3072->64" in record["config_changes"] and "sliding_window" not in record["config_changes"]


def test_a_repeating_layer_pattern_survives_whole(tmp_path):
    """Gemma 3's five sliding layers then a full one: the twin has six layers in that order, not one of each."""
    spec = model_twin_spec(str(_folder(tmp_path, "gemma3-1b", GEMMA3_TEXT)))
    assert own_table(spec)["num_hidden_layers"] == 6
    folder = build.build_twin(spec, isolated=False)
    types = json.loads((folder / "config.json").read_text())["layer_types"]
    assert types == ["sliding_attention"] * 5 + ["full_attention"]


def test_experts_shrink_but_never_below_the_top_k(tmp_path):
    """Qwen3-30B-A3B routes to 8 of 128 experts: the twin keeps top-8 with 16 experts; groups are honoured."""
    table = own_table(model_twin_spec(str(_folder(tmp_path, "qwen3-moe", QWEN3_MOE))))
    assert table["num_experts"] == 16 and "num_experts_per_tok" not in table
    assert experts_for(256, 8, 8) == 16 and experts_for(8, 2, 1) == 4 and experts_for(3, 2, 1) == 3


def test_a_field_the_shrink_changed_beyond_sizes_refuses_the_twin(tmp_path):
    """A changed window or rope type is not a size: named as unkept (the build then raises, so the row is UNTESTED
    with that field, never a PASS of another model)."""
    changed = {**PHI3, "sliding_window": None, "intermediate_size": 128}
    changes = config_changes(PHI3, changed)
    assert set(changes) == {"sliding_window", "intermediate_size"}
    assert unkept(changes) == ["sliding_window"]
    spec = model_twin_spec(str(_folder(tmp_path, "phi35", PHI3)))
    built = tmp_path / "built"
    built.mkdir()
    (built / "config.json").write_text(json.dumps(changed))
    with pytest.raises(ValueError, match="could not keep sliding_window"):
        build._own_record(spec, built)


def test_a_model_twin_changes_sizes_only_besides_a_closed_list_each_with_its_reason():
    """The rule docs/design.md and the README state: sizes only, except the closed list NON_SIZE_CHANGES (token ids
    remapped into the shrunk vocabulary, the output head untied, use_cache under sentence-transformers); any other
    change, use_cache on a text generator included, refuses the twin."""
    from neuronhelpers.twins.own import NON_SIZE_CHANGES, non_size_change

    assert set(NON_SIZE_CHANGES) == {"token ids", "tie_word_embeddings", "use_cache (sentence-transformers)"}
    assert all(len(reason) > 40 for reason in NON_SIZE_CHANGES.values())  # each says why
    base = {**PHI3, "tie_word_embeddings": True, "eos_token_id": 32000, "use_cache": True}
    changed = {**base, "tie_word_embeddings": False, "eos_token_id": 0, "use_cache": False}
    changes = config_changes(base, changed)
    assert unkept(changes) == ["use_cache"]  # a text generator's use_cache is not on the list
    assert unkept(changes, FEATURE_EXTRACTION) == []
    assert non_size_change("text_config.image_token_id") == "token ids"
    assert non_size_change("sliding_window") is None and non_size_change("model_id") is None


def test_a_model_twin_carries_the_models_own_generation_config_with_its_token_ids_remapped(tmp_path):
    """generate() reads use_cache and the token ids from generation_config.json: a model twin writes the model's own
    where its config came with one (the corpus's Yi-1.5-9B-Chat-16K: none sets use_cache), ids as the twin's config."""
    from neuronhelpers.twins.own import GENERATION_CONFIG, carry_generation_config

    folder = _folder(tmp_path, "acme--gen", {**PHI3, "bos_token_id": 1, "eos_token_id": 32000})
    (folder / GENERATION_CONFIG).write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 32000,
                                                        "pad_token_id": 32001, "do_sample": False}))
    spec = model_twin_spec(str(folder))
    built = tmp_path / "built"
    built.mkdir()
    (built / "config.json").write_text(json.dumps({**PHI3, "bos_token_id": 1, "eos_token_id": 3, "vocab_size": 400}))
    assert carry_generation_config(spec, built)
    written = json.loads((built / GENERATION_CONFIG).read_text())
    assert written == {"bos_token_id": 1, "eos_token_id": 3, "do_sample": False}  # 32001: beyond the twin's vocabulary
    yi = json.loads(model_twin_spec("01-ai/Yi-1.5-9B-Chat-16K").own)
    assert "use_cache" not in json.loads(yi["files"][GENERATION_CONFIG])
    assert not carry_generation_config(model_twin_spec("01-ai/Yi-1.5-6B-Chat"), built)  # no copy: transformers' own


def test_a_corpus_twin_carries_where_its_config_came_from():
    """The row's config_* columns come from SOURCE.json: repo@commit:path, the form, whether the Hub id was inferred,
    and for the models whose own config turns the verdict whether a second copy was found."""
    from neuronhelpers.twins.corpus import PROVENANCE_KEYS, provenance

    source = json.loads(model_twin_spec("01-ai/Yi-1.5-6B-Chat").own)["source"]
    assert set(source) == set(PROVENANCE_KEYS)
    assert source["config_source"] == ("github:Girafboy/pytorchKQI@4adb1da:llms/01-ai/Yi-1.5-6B-Chat/config.json")
    assert source["config_corroboration"].startswith("uncorroborated: use_cache seen in this copy only")
    assert provenance("microsoft/phi-1")["config_id_inferred"] is True
    assert provenance("microsoft/Phi-3.5-mini-instruct")["config_corroboration"].startswith("corroborated")
    looked = [r for r in records().values() if r.get("corroboration")]
    assert len(looked) == 14 and all(r["corroboration"]["summary"].split(":")[0] in
                                     ("corroborated", "uncorroborated") for r in looked)
    assert provenance("google/gemma-3-270m") is None  # no copy of its config: its twin comes from the shelf


def test_an_older_configs_own_names_for_sizes_are_sizes():
    """gpt2 names its sizes n_head, n_layer, n_embd (aliases in GPT2Config.attribute_map): shrinking them is a size
    change, so the twin is built, while its activation or window still may not change."""
    gpt2 = {"model_type": "gpt2", "n_head": 12, "n_layer": 12, "n_embd": 768, "activation_function": "gelu_new"}
    changes = config_changes(gpt2, {**gpt2, "n_head": 4, "n_layer": 2, "n_embd": 64, "activation_function": "relu"})
    assert unkept(changes) == ["activation_function"]


# ---- where the config is read ----------------------------------------------------------------------------------------

@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A local Hub as HF_ENDPOINT, huggingface_hub's cache under tmp_path."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path / "hf-home" / "hub"))
    registry = tmp_path / "hf-home" / ".agent_harnesses.json"
    registry.parent.mkdir(parents=True, exist_ok=True)
    registry.write_text(json.dumps(EMPTY_AGENT_REGISTRY))
    monkeypatch.setattr(hf_constants, "AGENT_HARNESSES_PATH", str(registry))
    with HubServer() as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield server


def test_online_the_config_comes_from_the_hub_and_no_weights_file_is_asked_for(hub):
    """The twin of a Hub id reads its config.json through huggingface_hub (HF_ENDPOINT applies); the repo's
    weights are never requested; a gated model says it needs a token."""
    hub.add_model("acme/phi-like", {"config.json": json.dumps(PHI3).encode(), "model.safetensors": b"\0" * 64})
    spec = model_twin_spec("acme/phi-like")
    assert json.loads(spec.own)["read"] == READ_HUB and spec.model_id == twin_id_for("acme/phi-like")
    assert spec.model_id == "tiny/acme--phi-like"
    asked = [r.path for r in hub.requests]
    assert any(p.endswith("/config.json") for p in asked)
    assert not any("safetensors" in p for p in asked), asked
    hub.add_model("acme/gated", {"config.json": b"{}"}, gated=True)
    with pytest.raises(UserError, match="gated"):
        model_twin_spec("acme/gated")
    assert hub.unhandled == []


def test_offline_the_config_comes_from_the_corpus():
    """Offline (the tests' default), a corpus model's twin is built from the config shipped in the package."""
    model_id = next(mid for mid, r in records().items() if "config.json" in r["files"]
                    and json.loads((Path(r["folder"]) / "config.json").read_text()).get("model_type") == "phi3")
    spec = build.twin_spec(twin_id_for(model_id))
    own = json.loads(spec.own)
    assert own["read"] == READ_CORPUS and own["twin_from"] == model_id
    assert own["files"]["config.json"] == (corpus_root() / folder_name(model_id) / "config.json").read_text()
    with pytest.raises(UserError, match="not at hand offline"):
        model_twin_spec("nobody/no-such-model")


def test_a_row_that_recorded_only_its_configs_digest_gets_its_source_from_the_copy_with_that_digest(tmp_path,
                                                                                                     monkeypatch):
    """Rows written before rows carried config_source (issue 54): the corpus's copy whose digest matches names it, a
    shelf copy names its packages, and a digest no copy has says so rather than leaving the column empty."""
    from neuronhelpers.twins.own import UNKNOWN_SOURCE, source_for_digest

    yi = json.loads(model_twin_spec("01-ai/Yi-1.5-6B-Chat").own)
    assert source_for_digest("01-ai/Yi-1.5-6B-Chat", yi["digest"]) == yi["source"]
    monkeypatch.setenv(SHELF_ENV, str(tmp_path / "shelf"))
    folder = tmp_path / "shelf" / "models" / "acme--shelved"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(PHI3))
    (folder / "PROVENANCE.json").write_text(json.dumps({"packages": ["acme-gguf==1.0"]}))
    shelved = json.loads(model_twin_spec("acme/shelved").own)
    assert source_for_digest("acme/shelved", shelved["digest"])["config_source"] == "shelf:acme-gguf==1.0"
    unknown = source_for_digest("01-ai/Yi-1.5-6B-Chat", "sha256:000000000000")["config_source"]
    assert unknown.startswith(UNKNOWN_SOURCE) and "sha256:000000000000" in unknown


def test_offline_a_shelf_copy_answers_where_the_corpus_has_no_config(tmp_path, monkeypatch):
    """A model whose config no public copy holds but whose real checkpoint the shelf installed (a registry package):
    its twin is built from the shelf's config, and says so (read: shelf)."""
    monkeypatch.setenv(SHELF_ENV, str(tmp_path / "shelf"))
    folder = tmp_path / "shelf" / "models" / "acme--shelved"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(PHI3))
    with pytest.raises(UserError, match="not at hand offline"):
        model_twin_spec("acme/shelved")  # not complete until its PROVENANCE.json is written
    (folder / "PROVENANCE.json").write_text("{}")
    assert json.loads(model_twin_spec("acme/shelved").own)["read"] == READ_SHELF


def test_the_corpus_sweep_leaves_out_what_no_task_of_ours_runs_and_says_why():
    """Classifiers and encoders without their modules.json are listed with why; an embedding model whose modules.json
    no public copy holds is a sentence-transformers twin by the corpus's record (its config names a causal LM)."""
    twins, skipped = corpus_twins()
    assert "BertForMaskedLM" in skipped["google-bert/bert-base-uncased"]
    assert "tiny/microsoft--Phi-3.5-mini-instruct" in twins and len(twins) > 100
    assert model_twin_spec("Qwen/Qwen3-Embedding-0.6B").task == FEATURE_EXTRACTION
    assert model_twin_spec("Qwen/Qwen3-8B").task == TEXT_GENERATION


@pytest.mark.slow
def test_run_a_folders_own_twin_from_the_command_line(tmp_path):
    """The vertical slice: `run FOLDER --twin` builds the folder's own twin (its config.json only), runs it under the
    recipe and prints the row: the architecture twin of phi3 PASSes, this one FAILs at compile on its real window."""
    folder = _folder(tmp_path, "phi-window", PHI3)
    done = run_cli("run", str(folder), "--twin", "--backend", "cpu", "--json")
    assert done.returncode == 1, done.stderr[-2000:]
    row = json.loads(done.stdout.strip().splitlines()[-1])
    assert row["model_id"] == "tiny/phi-window" and row["twin_of"] == "phi3"
    assert row["twin_from"] == str(folder.resolve()) and row["config_digest"].startswith("sha256:")
    assert "num_hidden_layers 32->2" in row["config_changes"]
    assert (row["result"], row["stage"]) == ("FAIL", "compile")
    assert "cumulative_length_int" in row["cause"]
