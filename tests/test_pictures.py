"""The lessons' three pictures (ui/pictures.py) are drawn from the package's data: change the data and the picture
changes with it."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from neuronhelpers.core import vocab  # noqa: E402
from neuronhelpers.core.backends import get_backend  # noqa: E402
from neuronhelpers.ui import pictures  # noqa: E402


def texts(ax) -> list[str]:
    found = [t.get_text() for t in ax.texts]
    plt.close(ax.figure)
    return found


def test_the_answer_ladder_shows_every_kind_of_answer_best_first(monkeypatch):
    shown = texts(pictures.answer_ladder())
    kinds = [t for t in shown if t in vocab.ANSWERS]
    assert kinds == list(vocab.ANSWERS)  # the order analysis/answers.py applies
    monkeypatch.setattr(vocab, "ANSWERS", {"only this": "a kind of row"})
    assert "only this" in texts(pictures.answer_ladder())


def test_the_chip_shows_the_topologys_cores_and_memory_for_either_lnc():
    default = " ".join(texts(pictures.trn2_chip()))
    assert "4 logical cores" in default and "24 GiB HBM" in default and "64 logical cores of 24 GiB" in default
    one = " ".join(texts(pictures.trn2_chip(lnc=1)))
    assert "8 logical cores" in one and "12 GiB HBM" in one and "128 logical cores of 12 GiB" in one


def test_the_compile_path_names_each_backends_compiler_and_cache():
    shown = " ".join(texts(pictures.compile_path()))
    for name, compiler in (("neuron", "neuronx-cc"), ("cpu", "inductor")):
        backend = get_backend(name)
        assert f"backend={backend.compile_backend!r}, compiler {compiler}" in shown
        assert f"${backend.cache_env}" in shown
    assert "NEFF" in shown and "FAIL at compile" in shown
