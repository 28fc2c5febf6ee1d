"""The compile cache: versioned address, sync and publish (local folder and an fsspec stand-in for
hf://buckets), refusal of another compiler version, and rows that say whether they hit the cache."""

import json

import fsspec
import pytest

from conftest import run_cli
from neuronhelpers.run import compile_cache as cache
from neuronhelpers.core.backends import get_backend
from neuronhelpers.core.errors import UserError
from neuronhelpers.run.harness import run_model

CPU = get_backend("cpu")


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    folder = tmp_path / "inductor-cache"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(folder))
    return folder


def fill(folder, n=3):
    for i in range(n):
        (folder / "fxgraph" / f"g{i}").mkdir(parents=True, exist_ok=True)
        (folder / "fxgraph" / f"g{i}" / "entry").write_bytes(bytes([i]) * 100)


def test_the_compiler_version_is_part_of_the_address(monkeypatch):
    import torch

    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    # the public release: torch's CPU and CUDA builds ("2.14.1+cpu", "2.14.1+cu130") share inductor
    assert cache.cache_dir(CPU).name == f"inductor-{torch.__version__.split('+')[0]}"
    assert cache.cache_key("neuronx-cc", "2.21.33") == "neuronxcc-2.21.33"
    command = cache.sync_command("neuronx-cc", "2.21.33", bucket="ns/cache")
    assert command.startswith("hf buckets sync hf://buckets/ns/cache/neuronxcc-2.21.33 ")


def test_torchs_own_default_does_not_hide_the_versioned_address(monkeypatch):
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", default_cache_dir())  # what torch sets once inductor has run
    assert cache.cache_dir(CPU).name == cache.current_key(CPU)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/somewhere/chosen")
    assert str(cache.cache_dir(CPU)) == "/somewhere/chosen"


def test_publish_then_sync_into_an_empty_cache(fresh_cache, tmp_path, monkeypatch):
    fill(fresh_cache)
    target, files = cache.publish_cache(str(tmp_path / "shared"), CPU)
    assert files == 3 and target.endswith(cache.current_key(CPU))
    manifest = json.loads((tmp_path / "shared" / cache.current_key(CPU) / cache.MANIFEST).read_text())
    assert manifest["compiler"] == "inductor" and manifest["files"] == 3

    other = tmp_path / "other-machine"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(other))
    folder, synced = cache.sync_cache(str(tmp_path / "shared"), CPU)
    assert folder == other and synced == 3
    assert (other / "fxgraph" / "g2" / "entry").read_bytes() == bytes([2]) * 100
    assert not (other / cache.MANIFEST).exists()


def test_a_cache_of_another_compiler_version_is_refused(fresh_cache, tmp_path):
    shared = tmp_path / "shared" / "inductor-1.0.0"
    shared.mkdir(parents=True)
    (shared / cache.MANIFEST).write_text(json.dumps({"key": "inductor-1.0.0"}))
    with pytest.raises(UserError, match=r"holds inductor-1\.0\.0; this machine compiles with inductor-.*never used"):
        cache.sync_cache(str(tmp_path / "shared"), CPU)
    with pytest.raises(UserError, match="was compiled by inductor-1.0.0"):
        cache.sync_cache(str(shared), CPU)  # pointing straight at the wrong version
    assert not fresh_cache.exists()  # nothing was copied


def test_the_hub_bucket_path_goes_through_fsspec(fresh_cache, monkeypatch, tmp_path):
    """hf://buckets/... resolves through fsspec (HfFileSystem); an in-memory fsspec filesystem stands in."""
    fill(fresh_cache, 2)
    target, _ = cache.publish_cache("memory://buckets/ns/cache", CPU)
    fs = fsspec.filesystem("memory")
    assert fs.exists(f"/buckets/ns/cache/{cache.current_key(CPU)}/{cache.MANIFEST}")
    assert cache.available_caches("memory://buckets/ns/cache") == [cache.current_key(CPU)]
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert cache.sync_cache("memory://buckets/ns/cache", CPU)[1] == 2
    fs.rm("/buckets", recursive=True)


def test_empty_cache_publish_and_missing_source_are_clear_errors(fresh_cache, tmp_path):
    with pytest.raises(UserError, match="is empty: run a model or a sweep first"):
        cache.publish_cache(str(tmp_path / "x"), CPU)
    with pytest.raises(UserError, match="no compile cache at"):
        cache.sync_cache(str(tmp_path / "nothing"), CPU)
    proc = run_cli("cache", "sync", env={"HF_HUB_OFFLINE": "1"})  # the default location is the public bucket
    assert proc.returncode == 2 and "cannot reach the Hub" in proc.stderr and "hf://buckets/" in proc.stderr


def test_rows_say_whether_the_run_hit_the_cache(fresh_cache):
    cold = run_model("tiny/granite", backend=CPU)
    warm = run_model("tiny/granite", backend=CPU)
    assert cold["result"] == warm["result"] == "PASS"
    assert (cold["cache_hit"], warm["cache_hit"]) == (False, True)
    assert warm["compile_s"] < cold["compile_s"]
