"""The compile cache: versioned address, sync and publish, refusal of another compiler version, and rows that say
whether they hit the cache.

The sync contract is tested without the device, on a folder laid out as the platform lays it out (torch-neuronx
is not installed here: the neuron backend's compiler version is monkeypatched). Each test's docstring quotes the
rule it holds us to, from the issue ("Trainium contract, point 4") or from torch-neuronx's source."""

import json
import os
import subprocess

import fsspec
import pytest

from conftest import run_cli
from neuronhelpers.core.backends import get_backend
from neuronhelpers.core.errors import UserError
from neuronhelpers.run import compile_cache
from neuronhelpers.run.harness import run_model

CPU = get_backend("cpu")
NEURON = get_backend("neuron")
NEURONX_CC = "2.28.7631.0"
KEY = f"neuronxcc-{NEURONX_CC}"
ENTRIES = {"ab/cd/abcd1234.neff": b"neff one", "ef/01/ef015678.neff": b"neff two!"}


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    folder = tmp_path / "inductor-cache"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(folder))
    return folder


@pytest.fixture
def neff_cache(tmp_path, monkeypatch):
    """The neuron backend's cache root, TORCH_NEURONX_NEFF_CACHE_DIR, pointed at a tmp folder; neuronx-cc
    "installed" at 2.28.7631.0 (torch-neuronx and neuronx-cc themselves are not installed here)."""
    from neuronhelpers.core import versions

    real = versions.distribution_version
    monkeypatch.setattr(versions, "distribution_version",
                        lambda name: NEURONX_CC if name == "neuronx-cc" else real(name))
    folder = tmp_path / "neff_cache"
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(folder))
    return folder


def lay_out(root, key=KEY, entries=ENTRIES):
    """A cache as the public bucket lays it out: <root>/neuronxcc-<version>/ab/cd/<key>.neff, no manifest."""
    for relative, content in entries.items():
        path = root / key / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return root / key


def fill(folder, n=3):
    for i in range(n):
        (folder / "fxgraph" / f"g{i}").mkdir(parents=True, exist_ok=True)
        (folder / "fxgraph" / f"g{i}" / "entry").write_bytes(bytes([i]) * 100)


def test_the_compiler_version_is_part_of_the_address(monkeypatch, tmp_path):
    """"The explorer's detail pane offers the public bucket's command only for neuron rows": the bucket holds
    neuronxcc-<version> folders, synced into torch-neuronx's cache root."""
    import torch

    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    # the public release: torch's CPU and CUDA builds ("2.14.1+cpu", "2.14.1+cu130") share inductor
    assert compile_cache.cache_dir(CPU).name == f"inductor-{torch.__version__.split('+')[0]}"
    assert compile_cache.cache_key("neuronx-cc", "2.21.33") == "neuronxcc-2.21.33"
    command = compile_cache.sync_command("neuronx-cc", "2.21.33", bucket="ns/cache")
    assert command == ("hf buckets sync hf://buckets/ns/cache/neuronxcc-2.21.33 "
                       "${TORCH_NEURONX_NEFF_CACHE_DIR:-/tmp/neff_cache}")
    assert compile_cache.sync_command("inductor", "2.13.0") is None  # never a bucket path for inductor
    # Where neuronx-cc is not installed (a laptop reading the notebook), the command asks the trn2 it is pasted on
    # for its compiler's version: the shell expands it into the bucket's own folder name.
    unknown = compile_cache.sync_command("neuronx-cc", None, bucket="ns/cache")
    assert unknown.startswith('hf buckets sync "hf://buckets/ns/cache/neuronxcc-$(') and "unknown" not in unknown
    # bash expands it into the installed version's folder: a stand-in python3 that says 2.99.0 plays the trn2
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "python3").write_text("#!/bin/sh\necho 2.99.0\n")
    (fake_bin / "python3").chmod(0o755)
    source = unknown[len("hf buckets sync "):unknown.rindex(" ")]
    expanded = subprocess.run(["bash", "-c", f"echo {source}"], capture_output=True, text=True,
                              env={**os.environ, "PATH": f"{fake_bin}:{os.environ['PATH']}"})
    assert expanded.stdout.strip() == "hf://buckets/ns/cache/neuronxcc-2.99.0", expanded
    local = compile_cache.local_cache_command("inductor", "2.13.0", "cuda")
    assert local.endswith("/compile-cache/cuda/inductor-2.13.0")


def test_torchs_own_default_does_not_hide_the_versioned_address(monkeypatch):
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", default_cache_dir())  # what torch sets once inductor has run
    assert compile_cache.cache_dir(CPU).name == compile_cache.current_key(CPU)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/somewhere/chosen")
    assert str(compile_cache.cache_dir(CPU)) == "/somewhere/chosen"


def test_the_neuron_cache_root_is_torch_neuronxs(monkeypatch, tmp_path):
    """torch-neuronx: "Uses TORCH_NEURONX_NEFF_CACHE_DIR or defaults to /tmp/neff_cache"
    (PersistentCacheBackend.cpp:21)."""
    monkeypatch.delenv("TORCH_NEURONX_NEFF_CACHE_DIR", raising=False)
    assert str(compile_cache.cache_dir(NEURON)) == "/tmp/neff_cache"
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path))
    assert compile_cache.cache_dir(NEURON) == tmp_path


def test_entries_land_where_torch_neuronx_reads_them(neff_cache, tmp_path):
    """"Entries land at the cache root as torch-neuronx reads them ($TORCH_NEURONX_NEFF_CACHE_DIR/ab/cd/<key>.neff)";
    torch-neuronx: 'key "abcd1234..." -> cache_dir/ab/cd/abcd1234....neff' (PersistentCacheBackend.cpp:63)."""
    folder = lay_out(tmp_path / "bucket")
    assert compile_cache.sync_cache(str(folder), NEURON) == (neff_cache, 2, 0)
    assert (neff_cache / "ab" / "cd" / "abcd1234.neff").read_bytes() == b"neff one"
    assert (neff_cache / "ef" / "01" / "ef015678.neff").read_bytes() == b"neff two!"
    assert not (neff_cache / KEY).exists()  # no version folder under the root: torch-neuronx would not look there
    assert sorted(compile_cache.cache_files(NEURON)) == sorted(ENTRIES)


def test_a_root_holding_version_folders_gives_the_installed_compilers(neff_cache, tmp_path):
    """"SOURCE is a neuronxcc-<version> folder or a bucket root holding them (at a root: the installed compiler's
    folder, or --compiler-version V)"."""
    root = tmp_path / "bucket"
    lay_out(root)
    lay_out(root, "neuronxcc-2.27.0", {"99/99/9999.neff": b"older compiler"})
    assert compile_cache.available_caches(str(root)) == ["neuronxcc-2.27.0", KEY]
    assert compile_cache.sync_cache(str(root), NEURON) == (neff_cache, 2, 0)
    assert sorted(compile_cache.cache_files(NEURON)) == sorted(ENTRIES)  # nothing of 2.27.0


def test_a_second_sync_moves_nothing(neff_cache, tmp_path):
    """"Only changed files move (a second sync moves nothing)"."""
    folder = lay_out(tmp_path / "bucket")
    compile_cache.sync_cache(str(folder), NEURON)
    entry = neff_cache / "ab" / "cd" / "abcd1234.neff"
    os.utime(entry, (1_000_000, 1_000_000))  # were it rewritten, its mtime would change
    assert compile_cache.sync_cache(str(folder), NEURON) == (neff_cache, 0, 2)
    assert compile_cache.sync_cache(str(folder.parent), NEURON) == (neff_cache, 0, 2)  # from the root too
    assert entry.stat().st_mtime == 1_000_000


def test_a_changed_file_moves_again(neff_cache, tmp_path):
    """"Only changed files move": a file of the same size but other content, or of another size, is copied."""
    folder = lay_out(tmp_path / "bucket")
    compile_cache.sync_cache(str(folder), NEURON)
    (folder / "ab" / "cd" / "abcd1234.neff").write_bytes(b"neff ONE")  # same size, other bytes
    assert compile_cache.sync_cache(str(folder), NEURON) == (neff_cache, 1, 1)
    assert (neff_cache / "ab" / "cd" / "abcd1234.neff").read_bytes() == b"neff ONE"
    (folder / "ef" / "01" / "ef015678.neff").write_bytes(b"longer neff two")
    assert compile_cache.sync_cache(str(folder), NEURON) == (neff_cache, 1, 1)
    assert not [p for p in neff_cache.rglob("*") if ".tmp." in p.name]  # each copy lands whole, by a rename


def test_a_root_holding_only_another_version_is_refused_in_one_line(neff_cache, tmp_path):
    """"A cache of another compiler version is never used silently": refused in one line naming what it holds."""
    root = tmp_path / "bucket"
    other = lay_out(root, "neuronxcc-2.27.0")
    refusal = rf"holds neuronxcc-2\.27\.0; this machine compiles with {KEY}\..*never used"
    with pytest.raises(UserError, match=refusal) as e:
        compile_cache.sync_cache(str(root), NEURON)
    assert "\n" not in str(e.value)
    with pytest.raises(UserError, match=r"holds neuronxcc-2\.27\.0; this machine compiles with"):
        compile_cache.sync_cache(str(other), NEURON)  # pointing straight at the wrong version
    with pytest.raises(UserError, match=r"holds inductor-2\.13\.0; this machine compiles with"):
        compile_cache.sync_cache(str(lay_out(root, "inductor-2.13.0")), NEURON)  # another compiler altogether
    assert not neff_cache.exists()  # nothing was copied


def test_without_the_compiler_installed_a_version_must_be_given(neff_cache, tmp_path, monkeypatch):
    """"At a root: the installed compiler's folder, or --compiler-version V": with no neuronx-cc installed there is
    no installed version to match, and the refusal says how to name one."""
    from neuronhelpers.core import versions

    monkeypatch.setattr(versions, "distribution_version", lambda name: None)
    folder = lay_out(tmp_path / "bucket")
    with pytest.raises(UserError, match=r"neuronxcc-unknown \(its compiler is not installed here: give "
                                        r"--compiler-version V\)"):
        compile_cache.sync_cache(str(folder), NEURON)
    assert compile_cache.sync_cache(str(folder), NEURON, NEURONX_CC)[1:] == (2, 0)


def test_compiler_version_picks_a_folder(neff_cache, tmp_path):
    """"At a root: the installed compiler's folder, or --compiler-version V"; another version than the one asked
    for is refused."""
    root = tmp_path / "bucket"
    lay_out(root)
    lay_out(root, "neuronxcc-2.27.0", {"99/99/9999.neff": b"older compiler"})
    assert compile_cache.sync_cache(str(root), NEURON, "2.27.0") == (neff_cache, 1, 0)
    assert (neff_cache / "99" / "99" / "9999.neff").read_bytes() == b"older compiler"
    assert compile_cache.sync_cache(str(root), NEURON, "neuronxcc-2.27.0")[1:] == (0, 1)  # the folder's name works too
    with pytest.raises(UserError, match=r"holds neuronxcc-2\.27\.0, neuronxcc-2\.28\.7631\.0; --compiler-version asks "
                                        r"for neuronxcc-2\.29\.0"):
        compile_cache.sync_cache(str(root), NEURON, "2.29.0")


def test_cache_sync_on_the_command_line_says_what_moved(tmp_path):
    """"`neuronhelpers cache sync` of a folder laid out as above: files synced; a second sync moving nothing"
    (--compiler-version: neuronx-cc is not installed here)."""
    folder = lay_out(tmp_path / "bucket")
    env = {"NEURONHELPERS_BACKEND": "neuron", "TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path / "x")}
    args = ("cache", "sync", str(folder), "--compiler-version", NEURONX_CC)
    first, second = run_cli(*args, env=env), run_cli(*args, env=env)
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert first.stdout == f"synced {KEY} from {folder} into {tmp_path / 'x'}: 2 files synced, 0 already up to date\n"
    assert second.stdout.endswith(": 0 files synced, 2 already up to date\n")
    assert (tmp_path / "x" / "ab" / "cd" / "abcd1234.neff").is_file()


def test_our_manifest_is_not_required_and_never_copied(neff_cache, tmp_path):
    """"No manifest of ours is required"; where one is present its key must match, and it is never copied."""
    folder = lay_out(tmp_path / "bucket")
    (folder / compile_cache.MANIFEST).write_text(json.dumps({"key": KEY}))
    assert compile_cache.sync_cache(str(folder), NEURON) == (neff_cache, 2, 0)
    assert not (neff_cache / compile_cache.MANIFEST).exists()
    legacy = tmp_path / "shared"  # a folder of ours named as its owner liked: the manifest tells its version
    lay_out(tmp_path, "shared", {"12/34/1234.neff": b"x"})
    (legacy / compile_cache.MANIFEST).write_text(json.dumps({"key": KEY}))
    assert compile_cache.sync_cache(str(legacy), NEURON)[1:] == (1, 0)
    (legacy / compile_cache.MANIFEST).write_text(json.dumps({"key": "neuronxcc-2.27.0"}))
    with pytest.raises(UserError, match=r"was compiled by neuronxcc-2\.27\.0; this machine compiles with"):
        compile_cache.sync_cache(str(legacy), NEURON)
    (folder / compile_cache.MANIFEST).write_text(json.dumps({"key": "neuronxcc-2.27.0"}))
    with pytest.raises(UserError, match="was compiled by neuronxcc-2.27.0"):
        compile_cache.sync_cache(str(folder), NEURON)  # a misnamed folder: the manifest, where present, wins


def test_publish_then_sync_into_an_empty_cache(fresh_cache, tmp_path, monkeypatch):
    """publish_cache writes <dest>/<key>/ with the cache root's relative layout; a sync brings it back as it was."""
    fill(fresh_cache)
    target, files = compile_cache.publish_cache(str(tmp_path / "shared"), CPU)
    assert files == 3 and target.endswith(compile_cache.current_key(CPU))
    manifest = json.loads((tmp_path / "shared" / compile_cache.current_key(CPU) / compile_cache.MANIFEST).read_text())
    assert manifest["compiler"] == "inductor" and manifest["files"] == 3

    other = tmp_path / "other-machine"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(other))
    assert compile_cache.sync_cache(str(tmp_path / "shared"), CPU) == (other, 3, 0)
    assert (other / "fxgraph" / "g2" / "entry").read_bytes() == bytes([2]) * 100
    assert not (other / compile_cache.MANIFEST).exists()


def test_other_fsspec_urls_go_through_fsspec(fresh_cache, monkeypatch, tmp_path):
    """"Local folders and other fsspec URLs keep using fsspec": an in-memory filesystem, and a second sync moves
    nothing there either."""
    fill(fresh_cache, 2)
    compile_cache.publish_cache("memory://buckets/ns/cache", CPU)
    fs = fsspec.filesystem("memory")
    try:
        assert fs.exists(f"/buckets/ns/cache/{compile_cache.current_key(CPU)}/{compile_cache.MANIFEST}")
        assert compile_cache.available_caches("memory://buckets/ns/cache") == [compile_cache.current_key(CPU)]
        monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "elsewhere"))
        assert compile_cache.sync_cache("memory://buckets/ns/cache", CPU)[1:] == (2, 0)
        assert compile_cache.sync_cache("memory://buckets/ns/cache", CPU)[1:] == (0, 2)
    finally:
        fs.rm("/buckets", recursive=True)


def test_hf_buckets_go_through_huggingface_hubs_bucket_sync(neff_cache, monkeypatch):
    """"hf://buckets/... goes through huggingface_hub's bucket API (sync_bucket, ...)", which skips unchanged files
    itself. The real API is not reachable here: sync_bucket is replaced by a stand-in that records its arguments."""
    import huggingface_hub
    from huggingface_hub._buckets import SyncOperation, SyncPlan

    from neuronhelpers.core import network

    calls = []

    def sync_bucket(source, dest, **options):
        calls.append((source, dest, options))
        return SyncPlan(source, dest, "now", [SyncOperation("download", "ab/cd/abcd1234.neff"),
                                              SyncOperation("skip", "ef/01/ef015678.neff")])

    monkeypatch.setattr(network, "hub_reachable", lambda **_: True)
    monkeypatch.setattr(huggingface_hub, "sync_bucket", sync_bucket)
    url = f"hf://buckets/ns/cache/{KEY}"
    assert compile_cache.sync_cache(url, NEURON) == (neff_cache, 1, 1)
    assert calls == [(url, str(neff_cache), {"exclude": [compile_cache.MANIFEST], "quiet": True})]
    with pytest.raises(UserError, match="holds neuronxcc-2.27.0"):
        compile_cache.sync_cache("hf://buckets/ns/cache/neuronxcc-2.27.0", NEURON)
    assert len(calls) == 1  # refused before any transfer


def test_offline_the_bucket_is_one_clear_line(neff_cache, monkeypatch):
    """Offline, hf://buckets/... says "cannot reach the Hub" in one line, before any network call."""
    import huggingface_hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub, "sync_bucket", lambda *a, **k: pytest.fail("no network call offline"))
    with pytest.raises(UserError, match=r"cannot reach the Hub .* for hf://buckets/ns/cache") as e:
        compile_cache.sync_cache("hf://buckets/ns/cache", NEURON)
    assert "\n" not in str(e.value)


def test_empty_cache_publish_and_missing_source_are_clear_errors(fresh_cache, tmp_path):
    """A sync with nothing to take, or a publish of nothing, says so in one line."""
    with pytest.raises(UserError, match="is empty: run a model or a sweep first"):
        compile_cache.publish_cache(str(tmp_path / "x"), CPU)
    with pytest.raises(UserError, match="no compile cache at"):
        compile_cache.sync_cache(str(tmp_path / "nothing"), CPU)
    proc = run_cli("cache", "sync", "--backend", "neuron", "--compiler-version", NEURONX_CC,
                   env={"HF_HUB_OFFLINE": "1"})  # the default location is the public bucket
    assert proc.returncode == 2 and "cannot reach the Hub" in proc.stderr and "hf://buckets/" in proc.stderr
    proc = run_cli("cache", "sync", "--backend", "cpu")  # the public bucket holds Neuron caches only
    assert proc.returncode == 2 and compile_cache.NEURON_ONLY in proc.stderr and "hf://buckets/" not in proc.stderr


@pytest.mark.slow
def test_rows_say_whether_the_run_hit_the_cache(fresh_cache):
    cold = run_model("tiny/granite", backend=CPU)
    warm = run_model("tiny/granite", backend=CPU)
    assert cold["result"] == warm["result"] == "PASS"
    assert (cold["cache_hit"], warm["cache_hit"]) == (False, True)
    assert warm["compile_s"] < cold["compile_s"]
