#!/usr/bin/env bash
# A live LLM-policy run through the file relay (scripts/llm_relay.py): builds the fixture source and a fresh
# stand-in target under WORK, writes the run spec, and runs `msmigrate run --policy llm` against the relay.
#   bash scripts/llm_relay_run.sh internvl_chat /work/relay/internvl /tmp/llm_live/internvl
#   bash scripts/llm_relay_run.sh qwen2_vl /work/relay/mtp2 /tmp/llm_live/mtp2 megatron 2   # Megatron stand-in, tp=2
# A player answers the requests in RELAY_DIR (see scripts/llm_relay.py); the run dir is WORK/runs/<run_id>/.
set -euo pipefail
fixture=${1:?fixture name}; relay_dir=${2:?relay dir}; work=${3:?work dir}
route=${4:-fsdp2}; tp=${5:-2}
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-$root/.venv/bin/python}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
mkdir -p "$work"
[ -e "$work/source" ] || "$py" -m msmigrate.faces.cli fixtures source "$fixture" "$work/source"
if [ "$route" = megatron ]; then
  [ -e "$work/target" ] || "$py" -c 'import sys; from pathlib import Path
from msmigrate.testbeds.megatron_standin import write_megatron_standin
write_megatron_standin(Path(sys.argv[1]))' "$work/target"
  parallelism="parallelism: {tp: $tp}"
else
  [ -e "$work/target" ] || "$py" -m msmigrate.faces.cli fixtures target "$work/target"
  parallelism=""
fi
# The player is an agent answering by hand: a request may take minutes, so the HTTP timeout and the wall budget
# are long; one request is never retried on a timeout (it would reach the player twice).
cat > "$work/spec.yaml" <<EOF
source: $work/source
target: $work/target
model_name: $fixture
policy: llm
llm:
  model: relay-player
  timeout_s: 3600
  max_transport_retries: 0
budgets:
  wall_seconds: 9000
launch:
  gate_train_iters: 5
$parallelism
EOF
exec "$py" "$root/scripts/llm_relay.py" --dir "$relay_dir" --label "msmigrate run --policy llm: $fixture into a fresh $route stand-in target" \
  -- "$py" -m msmigrate.faces.cli run "$work/spec.yaml" --runs-dir "$work/runs"
