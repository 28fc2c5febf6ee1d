#!/usr/bin/env bash
# Create the project's virtual environment and install neuronhelpers into it.
#
# Where the Python running this already has torch (e.g. a Neuron Deep Learning Container with torch and
# torch-neuronx), the venv sees those packages and torch is never reinstalled. Elsewhere torch goes in first,
# with the torchvision built against it: TorchNeuron supports torch 2.13 and 2.14, and the default is
# torch 2.14.1 with torchvision 0.29.1 because vision-language processors that carry a video processor
# (Qwen2-VL and its family) cannot be built without torchvision, and PyPI's torchvision does not load next
# to the CPU-only torch 2.13.0 wheel. TORCH_SPEC chooses another pair (e.g. "torch==2.13.0" without vision).
#
#   scripts/setup_env.sh [VENV]                 the project's environment (default .venv)
#   NEURONHELPERS_SETUP_ONLY=torch scripts/...  stop once torch is in place (used by the tests)
set -euo pipefail
VENV=${1:-.venv}
PYTHON=${PYTHON:-python3}
DEFAULT_TORCH_SPEC="torch==2.14.1 torchvision==0.29.1"
TORCH_SPEC=${TORCH_SPEC:-$DEFAULT_TORCH_SPEC}

if [ ! -x "$VENV/bin/python" ]; then
  if "$PYTHON" -c "import torch" >/dev/null 2>&1; then
    echo "setup: $PYTHON already has torch $("$PYTHON" -c 'import torch; print(torch.__version__)'): keeping it"
    "$PYTHON" -m venv --system-site-packages "$VENV"
    if ! "$VENV/bin/python" -c "import torch" >/dev/null 2>&1; then
      # $PYTHON is itself a virtual environment (the Neuron DLAMI keeps torch-neuronx in one): --system-site-packages
      # shows only its base interpreter, so point the new venv at $PYTHON's own site-packages too.
      site_dir=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
      "$PYTHON" -c 'import site; print("\n".join(site.getsitepackages()))' > "$site_dir/_neuronhelpers_parent_env.pth"
    fi
  else
    "$PYTHON" -m venv "$VENV"
  fi
fi
PIP=("$VENV/bin/python" -m pip)
INSTALL=("${PIP[@]}" install)
INSTALLER=pip
if ! "$VENV/bin/python" -c "import torch" >/dev/null 2>&1; then
  # The default pair is a CUDA build (about 7 GB installed with its nvidia wheels and our dependencies): say so in one
  # line before pip fills the disk half way (a CI run once stopped with "No space left on device" 32 s in).
  need_gb=${NEURONHELPERS_SETUP_NEEDS_GB:-$([ "$TORCH_SPEC" = "$DEFAULT_TORCH_SPEC" ] && echo 8 || echo 3)}
  free_gb=$(df -Pk "$VENV" | awk 'NR==2 {print int($4 / 1048576)}')
  if [ "$free_gb" -lt "$need_gb" ]; then
    echo "setup: $TORCH_SPEC needs about $need_gb GB free under $VENV and $free_gb GB are: free some disk, or choose the" \
         "CPU-only wheel without vision (TORCH_SPEC=\"torch==2.13.0\", about 3 GB in all)" >&2
    exit 1
  fi
  # uv (from PyPI) installs the same requirements several times faster than pip: torch 2.14.1 with its CUDA wheels
  # in 27 s against pip's 96 s on 2 cores, no cache (2026-12-07). Only where this script installs the default torch
  # itself from the registry: a torch already present (a Neuron DLAMI's, kept as it is) and another TORCH_SPEC (the
  # CPU wheel that pip's own configuration may find on disk) stay with pip. NEURONHELPERS_INSTALLER=pip chooses pip.
  if [ "${NEURONHELPERS_INSTALLER:-uv}" = uv ] && [ "$TORCH_SPEC" = "$DEFAULT_TORCH_SPEC" ] \
     && [ -z "${TORCH_INDEX_URL:-}" ] && "${PIP[@]}" install --quiet uv >/dev/null 2>&1; then
    # --compile-bytecode: pip writes each module's .pyc at install and uv does not; where PYTHONDONTWRITEBYTECODE is
    # set (this CI's machines), every process would compile torch and transformers from source again (CI's pytest
    # took 39 min instead of 28 without it)
    INSTALL=("$VENV/bin/uv" pip install --compile-bytecode --python "$VENV/bin/python")
    INSTALLER=uv
  else
    "${PIP[@]}" install --quiet --upgrade pip
  fi
  echo "setup: installing $TORCH_SPEC with $INSTALLER"
  # TORCH_INDEX_URL (e.g. https://download.pytorch.org/whl/cpu) where the wheels are not on the default index.
  # shellcheck disable=SC2086 - TORCH_SPEC is a list of requirements
  "${INSTALL[@]}" --quiet $TORCH_SPEC ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
fi
if [ "${NEURONHELPERS_SETUP_ONLY:-}" = torch ]; then
  exit 0
fi
CONSTRAINTS=${NEURONHELPERS_CONSTRAINTS-constraints.txt}
# NEURONHELPERS_EXTRAS: the optional extras beyond the tests (default: models, the packages some architectures import)
EXTRAS=${NEURONHELPERS_EXTRAS-models}
"${INSTALL[@]}" --quiet -e ".[test${EXTRAS:+,$EXTRAS}]" ${CONSTRAINTS:+-c "$CONSTRAINTS"}
echo "setup: ready ($("$VENV/bin/python" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'))"
