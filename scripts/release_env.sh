#!/usr/bin/env bash
# An environment for another release of a library or of the compiler, to sweep the same catalog with it:
#
#   TRANSFORMERS_VERSION=5.24.0 scripts/release_env.sh .venv-transformers-5.24.0   another transformers
#   TORCH_SPEC="torch==2.13.0" scripts/release_env.sh .venv-torch-2.13.0          another torch (inductor)
#
# Everything else is what the project's own environment gets (scripts/setup_env.sh, constraints.txt), so a
# sweep in it differs from the main one by that one release. A torch without a matching torchvision (2.13.0
# here) leaves processors that need torchvision unbuildable: those architectures are recorded UNTESTED
# (dependency), not FAIL.
set -euo pipefail
VENV=${1:?usage: release_env.sh VENV}
cd "$(dirname "$0")/.."
constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
if [ -n "${TRANSFORMERS_VERSION:-}" ]; then
  sed "s/^transformers==.*/transformers==${TRANSFORMERS_VERSION}/" constraints.txt > "$constraints"
else
  cp constraints.txt "$constraints"
fi
if [ -n "${TORCH_SPEC:-}" ]; then
  # Another torch: pin it, so no dependency upgrades it, and leave out the extras that need torchvision.
  echo "$TORCH_SPEC" | tr ' ' '\n' >> "$constraints"
  export NEURONHELPERS_EXTRAS=""
fi
NEURONHELPERS_CONSTRAINTS="$constraints" bash scripts/setup_env.sh "$VENV"
