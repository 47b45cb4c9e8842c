#!/usr/bin/env bash
# Creates .venv (if missing) and installs msmigrate with the CPU target runtime.
# CPU torch goes in FIRST and pinned: an unpinned torch pulls a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
. .venv/bin/activate
python -m pip install -q --upgrade pip >/dev/null
if ! python -c "import torch" >/dev/null 2>&1; then
  python -m pip install -q "torch==${MSMIGRATE_TORCH_VERSION:-2.13.0}"
fi
python -m pip install -q -e ".[runtime,dev]"
