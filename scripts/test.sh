#!/usr/bin/env bash
# One command for the test suite: install, then run every test (unit + CPU torchrun integration).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
python -m pytest -q "$@"
