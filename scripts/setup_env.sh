#!/usr/bin/env bash
# Create the project's virtual environment and install neuronhelpers into it.
#
# Where the Python running this already has torch (e.g. a Neuron Deep Learning Container with
# torch and torch-neuronx), the venv sees those packages and torch is never reinstalled. Elsewhere
# the CPU build of torch goes in first, so nothing pulls the multi-GB CUDA build.
set -euo pipefail
VENV=${1:-.venv}
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}

if [ ! -x "$VENV/bin/python" ]; then
  if "$PYTHON" -c "import torch" >/dev/null 2>&1; then
    echo "setup: $PYTHON already has torch $("$PYTHON" -c 'import torch; print(torch.__version__)'): keeping it"
    "$PYTHON" -m venv --system-site-packages "$VENV"
  else
    "$PYTHON" -m venv "$VENV"
  fi
fi
PIP=("$VENV/bin/python" -m pip)
"${PIP[@]}" install --quiet --upgrade pip
if ! "$VENV/bin/python" -c "import torch" >/dev/null 2>&1; then
  echo "setup: installing $TORCH_SPEC (CPU build)"
  # TORCH_INDEX_URL (e.g. https://download.pytorch.org/whl/cpu) where the CPU wheel is not the default.
  "${PIP[@]}" install --quiet "$TORCH_SPEC" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
fi
CONSTRAINTS=${NEURONHELPERS_CONSTRAINTS-constraints.txt}
"${PIP[@]}" install --quiet -e ".[test]" ${CONSTRAINTS:+-c "$CONSTRAINTS"}
echo "setup: ready ($("$VENV/bin/python" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'))"
