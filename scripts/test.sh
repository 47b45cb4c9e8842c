#!/usr/bin/env bash
# One command for the test suite: install, then run every test (unit + CPU torchrun integration), then the tests
# against the real MindSpeed-MM (marker realmm) when its snapshots are found (../shared/realmm or
# $MSMIGRATE_REALMM_DIR): their runtime (torch 2.7.1 + transformers 4.57, several GB the first time) is built once by
# scripts/real_target.sh and kept in $MSMIGRATE_REAL_RUNTIME (default ~/.cache/msmigrate/real-runtime).
# With arguments, only `pytest -q ARGS` runs (the real runtime is used when it is already there). `--full` (alone)
# also runs the `long` tier (tests/suite_tiers.py: end-to-end runs repeating a route the default selection covers once).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export MSMIGRATE_REAL_RUNTIME="${MSMIGRATE_REAL_RUNTIME:-$HOME/.cache/msmigrate/real-runtime}"
TIER="and not long"
if [ "${1:-}" = "--full" ] && [ $# -eq 1 ]; then
  TIER=""; shift
fi
if [ $# -gt 0 ]; then
  exec python -m pytest -q "$@"
fi
# Two pytest-xdist workers, one test file (or file group, tests/conftest.py) per work unit: much of the suite waits
# on torchrun launches and subprocesses, so a second worker fills that time. Units go out in collection order
# (tests/agent's long end-to-end runs first, the many short files last, so the workers finish close together).
# MSMIGRATE_TEST_WORKERS=0 runs serially.
python -m pytest -q -m "not realmm $TIER" -n "${MSMIGRATE_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder
if bash scripts/real_target.sh "$HOME/.cache/msmigrate/real-target" --runtime "$MSMIGRATE_REAL_RUNTIME"; then
  python -m pytest -q -m "realmm $TIER"
else
  echo "note: no real MindSpeed-MM runtime (snapshots not found or install failed); the realmm tests skip" >&2
  python -m pytest -q -m "realmm $TIER"
fi
