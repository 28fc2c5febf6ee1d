# make demo   set up .venv and run the main job on the built-in default
# make test   set up .venv and run the whole test suite
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test clean

$(STAMP): pyproject.toml scripts/setup_env.sh
	bash scripts/setup_env.sh $(VENV)
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(PY) -m neuronhelpers demo

test: install
	$(PY) -m pytest

clean:
	rm -rf $(VENV) results .pytest_cache
