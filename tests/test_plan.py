"""The planner lands on the core counts a trn2 needs for well-known checkpoints (24 GiB per core, bf16)."""

import pytest
import transformers
from packaging.version import Version

from neuronhelpers.core.backends import GiB, get_backend
from neuronhelpers.core.errors import UserError
from neuronhelpers.models.resolve import resolve_model
from neuronhelpers.plan.cores import estimate_parameters, plan_cores, plan_model, safetensors_parameters
from neuronhelpers.twins import build

TRN2_CORE = 24 * GiB

# (config as the checkpoint's config.json has it, published parameter count, cores, parallelism)
KNOWN = {
    "meta-llama/Llama-3.1-8B": (transformers.LlamaConfig(
        vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=8), 8.03e9, 1, "none"),
    "meta-llama/Llama-3.1-70B": (transformers.LlamaConfig(
        vocab_size=128256, hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
        num_attention_heads=64, num_key_value_heads=8), 70.6e9, 8, "tp"),
    "Qwen/Qwen3-0.6B": (transformers.Qwen3Config(
        vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
        num_key_value_heads=8, head_dim=128, tie_word_embeddings=True), 0.6e9, 1, "none"),
    "Qwen/Qwen3-32B": (transformers.Qwen3Config(
        vocab_size=151936, hidden_size=5120, intermediate_size=25600, num_hidden_layers=64, num_attention_heads=64,
        num_key_value_heads=8, head_dim=128), 32.8e9, 4, "tp"),
    "Qwen/Qwen3-30B-A3B": (transformers.Qwen3MoeConfig(
        vocab_size=151936, hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768, num_hidden_layers=48,
        num_attention_heads=32, num_key_value_heads=4, head_dim=128, num_experts=128, num_experts_per_tok=8),
        30.5e9, 4, "tp+ep"),
    "mistralai/Mixtral-8x7B-v0.1": (transformers.MixtralConfig(
        vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, num_local_experts=8), 46.7e9, 8, "tp+ep"),
    # gpt-oss: 32 experts split 4 ways. transformers 5.23 has no TP plan for gpt_oss (EP alone); 5.24 added one
    # for its embeddings (TP+EP). Written out per release, not derived from the config the planner reads.
    "openai/gpt-oss-20b": (transformers.GptOssConfig(
        vocab_size=201088, hidden_size=2880, intermediate_size=2880, num_hidden_layers=24, num_attention_heads=64,
        num_key_value_heads=8, head_dim=64, num_local_experts=32, num_experts_per_tok=4), 20.9e9, 4,
        "ep" if Version(transformers.__version__) < Version("5.24") else "tp+ep"),
}


@pytest.mark.parametrize("model_id", KNOWN)
def test_known_checkpoints_land_on_trn2_core_counts(model_id):
    config, parameters, cores, parallelism = KNOWN[model_id]
    plan = plan_cores(config, int(parameters), dtype="bfloat16", core_memory=TRN2_CORE)
    assert (plan.cores, plan.excluded, plan.parallelism) == (cores, None, parallelism), plan.describe()


@pytest.mark.parametrize("model_id", KNOWN)
def test_config_estimate_is_within_3_percent_of_the_published_count(model_id):
    config, parameters, _, _ = KNOWN[model_id]
    assert abs(estimate_parameters(config) - parameters) / parameters < 0.03


def test_more_than_16_cores_is_an_exclusion_with_its_reason():
    config = KNOWN["meta-llama/Llama-3.1-70B"][0]
    plan = plan_cores(config, int(405e9), dtype="bfloat16", core_memory=TRN2_CORE)
    assert plan.cores is None and plan.excluded.startswith("incompatible: needs more than 16 cores")


def test_an_architecture_without_tp_plan_that_needs_two_cores_is_excluded():
    config = transformers.GPT2Config(n_embd=4096, n_layer=48, n_head=32)
    plan = plan_cores(config, int(20e9), dtype="bfloat16", core_memory=TRN2_CORE)
    assert plan.excluded and "cannot be split" in plan.excluded


def test_heads_not_divisible_by_the_needed_count_is_excluded_with_the_numbers():
    config = transformers.LlamaConfig(num_attention_heads=20, num_key_value_heads=20, hidden_size=1280)
    plan = plan_cores(config, int(50e9), dtype="bfloat16", core_memory=TRN2_CORE)  # needs 5 -> 8 and 16: 20 heads
    assert plan.cores is None
    assert plan.excluded == ("incompatible: needs 5+ cores but TP over 16: 20 attention heads and 20 key-value "
                             "heads are not divisible by 16")


def test_the_cpu_budget_is_configurable(monkeypatch):
    config = KNOWN["Qwen/Qwen3-0.6B"][0]
    monkeypatch.setenv("NEURONHELPERS_CORE_GIB", "1")
    ref = resolve_model("tiny/qwen3")
    from neuronhelpers.plan.cores import core_bytes

    assert core_bytes(get_backend("cpu")) == GiB and core_bytes(get_backend("neuron")) == TRN2_CORE
    plan = plan_cores(config, int(0.6e9), dtype="bfloat16", core_memory=core_bytes(get_backend("cpu")))
    assert plan.cores == 2 and plan.parallelism == "tp"
    assert plan_model(ref, get_backend("cpu")).cores == 1  # a twin fits anywhere


def test_weights_are_read_from_safetensors_headers():
    path = build.build_twin("llama")
    import safetensors.torch

    tensors = safetensors.torch.load_file(path / "model.safetensors")
    assert safetensors_parameters(path) == sum(t.numel() for t in tensors.values())
    plan = plan_model(resolve_model("tiny/llama"), get_backend("cpu"))
    assert plan.weight_source == "safetensors headers"


@pytest.mark.slow
def test_forcing_cores_checks_the_split():
    ref = resolve_model("tiny/gpt2")
    with pytest.raises(UserError, match="--cores 2: no tensor-parallel plan"):
        plan_model(ref, get_backend("cpu"), cores=2)
    with pytest.raises(UserError, match="--cores 3: choose one of 1, 2, 4, 8, 16"):
        plan_model(resolve_model("tiny/llama"), get_backend("cpu"), cores=3)
    forced = plan_model(resolve_model("tiny/llama"), get_backend("cpu"), cores=2)
    assert (forced.cores, forced.parallelism) == (2, "tp")


@pytest.mark.slow
def test_offline_plan_counts_a_corpus_models_parameters_from_its_config_instead_of_failing(tmp_path):
    """A Hub id not at hand offline whose config the package holds is planned from that config (parameters counted on
    the meta device, no weights), and the plan says so; the catalog's answer comes first, naming its pair."""
    from conftest import run_cli

    env = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "NEURONHELPERS_HOME": str(tmp_path / "home")}
    proc = run_cli("plan", "microsoft/Phi-3.5-mini-instruct", "--backend", "neuron", env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "not at hand offline: planned from its config alone" in out
    assert "3.82B parameters" in out and "counted from the copy of its config the package holds" in out
    assert "1 core, parallelism none" in out
    unknown = run_cli("plan", "nobody/not-in-the-corpus", env=env, timeout=300)
    assert unknown.returncode != 0 and len(unknown.stderr.strip().splitlines()) == 1
