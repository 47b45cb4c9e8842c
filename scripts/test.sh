#!/usr/bin/env bash
# One command for the test suite: install, then run every test (unit + CPU torchrun integration), then the tests
# against the real MindSpeed-MM (marker realmm) when its snapshots are found (../shared/realmm or
# $MSMIGRATE_REALMM_DIR): their runtime (torch 2.7.1 + transformers 4.57, several GB the first time) is built once by
# scripts/real_target.sh and kept in $MSMIGRATE_REAL_RUNTIME (default ~/.cache/msmigrate/real-runtime).
# With arguments, only `pytest -q ARGS` runs (the real runtime is used when it is already there).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export MSMIGRATE_REAL_RUNTIME="${MSMIGRATE_REAL_RUNTIME:-$HOME/.cache/msmigrate/real-runtime}"
if [ $# -gt 0 ]; then
  exec python -m pytest -q "$@"
fi
python -m pytest -q -m "not realmm"
if bash scripts/real_target.sh "$HOME/.cache/msmigrate/real-target" --runtime "$MSMIGRATE_REAL_RUNTIME"; then
  python -m pytest -q -m realmm
else
  echo "note: no real MindSpeed-MM runtime (snapshots not found or install failed); the realmm tests skip" >&2
  python -m pytest -q -m realmm
fi
