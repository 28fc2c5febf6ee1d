# make demo   set up .venv and run the main job: sweep the Selected list's twins into ./results
# make test   set up .venv and run the whole test suite (notebooks and the browser test included)
# make lab    open the notebooks in JupyterLab
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test gate lab bench clean

$(STAMP): pyproject.toml constraints.txt scripts/setup_env.sh
	bash scripts/setup_env.sh $(VENV)
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(PY) -m neuronhelpers demo

test: install
	bash scripts/install_browser.sh
	$(PY) -m pytest

# The expected-results gate: a small twin sweep checked against expected/cpu_twins.csv (CI runs it).
GATE_DIR ?= .gate-results
gate: install
	rm -rf $(GATE_DIR)
	$(PY) -m neuronhelpers sweep tiny/gemma2 tiny/llama tiny/llava tiny/qwen3 tiny/qwen3_moe --out $(GATE_DIR) --no-progress
	$(PY) -m neuronhelpers check --expected expected/cpu_twins.csv $(GATE_DIR)

lab: install
	$(PY) -m pip install --quiet -e ".[lab]" -c constraints.txt
	$(VENV)/bin/jupyter lab notebooks/ $$([ "$$(id -u)" = 0 ] && echo --allow-root)

bench: install
	$(PY) bench/bench_dataset.py
	$(PY) bench/bench_explorer.py

clean:
	rm -rf $(VENV) results .pytest_cache test-artifacts .gate-results
