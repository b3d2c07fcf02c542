#!/usr/bin/env bash
# Installs what torch_musa needs and builds it against the installed torch.
# Safe to re-run. Uses the CPU torch 2.13.0 wheel unless a supported torch
# (2.11-2.15) is already installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  # ccache speeds rebuilds up; GoogleTest runs the runtime's C++ tests.
  if ! dpkg -s libgtest-dev ccache >/dev/null 2>&1; then
    (apt-get update -qq && apt-get install -y -qq libgtest-dev ccache >/dev/null) ||
      echo "setup: apt-get failed; building without ccache/GoogleTest (runtime C++ tests will be skipped)"
  fi
fi

if ! $PY -c "import torch, sys; v=tuple(map(int, torch.__version__.split('+')[0].split('.')[:2])); sys.exit(0 if (2,11) <= v <= (2,15) else 1)" 2>/dev/null; then
  $PY -m pip install -q torch==2.13.0 numpy
fi
# Pinned to the installed torch so nothing pulls a second one. (Read from the
# package metadata: importing torch before numpy is installed warns.)
TORCH_VERSION=$($PY -c "from importlib.metadata import version; print(version('torch').split('+')[0])")
$PY -m pip install -q "torch==${TORCH_VERSION}" numpy ninja cmake expecttest pytest pytest-timeout libcst tqdm
# torchao's float8 training runs on musa too; its interop test needs it (no deps: never a second torch).
$PY -m pip install -q --no-deps torchao || echo "setup: torchao not installed; its float8 interop test will be skipped"
# The Hugging Face programs' tests (tests/integrations) run these libraries unmodified on musa.
$PY -m pip install -q "torch==${TORCH_VERSION}" transformers accelerate peft diffusers ||
  echo "setup: the Hugging Face libraries were not installed; tests/integrations will be skipped"
$PY -m pip install -q --no-build-isolation -e .
$PY -c "import torch; print('torch_musa ready:', torch.musa.device_count(), 'musa device(s), driver', torch.musa.get_driver_name())"
