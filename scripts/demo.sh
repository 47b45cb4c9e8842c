#!/usr/bin/env bash
# One command for a newcomer: install, then migrate a bundled model into a fresh stand-in target (offline).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
msmigrate demo "$@"
