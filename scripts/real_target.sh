#!/usr/bin/env bash
# Builds a real MindSpeed-MM target for msmigrate: DEST/MindSpeed-MM (a git checkout of the snapshot, `mindspeed`
# importable through the runtime) and DEST/runtime (a venv with torch 2.7.1 + transformers 4.57.0 and the rest of
# what MM's FSDP2 plugin route imports on CPU; never torch_npu). Idempotent: a finished step is skipped.
#
#   bash scripts/real_target.sh DEST [--snapshots DIR] [--runtime VENV]
#
#   --snapshots DIR  folder holding MindSpeed-MM.tar.gz and MindSpeed.tar.gz (default: shared/realmm found next to
#                    or above this repository, or $MSMIGRATE_REALMM_DIR)
#   --runtime VENV   build/reuse the venv at VENV and link DEST/runtime to it (default DEST/runtime; or
#                    $MSMIGRATE_REAL_RUNTIME). One runtime serves any number of checkouts: the checkout, not the
#                    venv, decides which mindspeed_mm is imported (the trainer runs from the checkout's root).
#
# Prints `target <path>` and `runtime_python <path>` last: the two fields a spec needs.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"

DEST=""; SNAP="${MSMIGRATE_REALMM_DIR:-}"; RUNTIME="${MSMIGRATE_REAL_RUNTIME:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --snapshots) SNAP="$2"; shift 2 ;;
    --runtime) RUNTIME="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) if [ -z "$DEST" ]; then DEST="$1"; shift; else echo "error: unexpected argument $1" >&2; exit 2; fi ;;
  esac
done
[ -n "$DEST" ] || { echo "usage: real_target.sh DEST [--snapshots DIR] [--runtime VENV]" >&2; exit 2; }

if [ -z "$SNAP" ]; then
  # ../shared/realmm relative to the checkout (a worktree one level deeper finds ../../shared/realmm).
  for cand in "$here/../shared/realmm" "$here/../../shared/realmm" "$here/../../../shared/realmm"; do
    if [ -f "$cand/MindSpeed-MM.tar.gz" ]; then SNAP="$cand"; break; fi
  done
fi
if [ -z "$SNAP" ] || [ ! -f "$SNAP/MindSpeed-MM.tar.gz" ] || [ ! -f "$SNAP/MindSpeed.tar.gz" ]; then
  echo "error: no MindSpeed-MM.tar.gz + MindSpeed.tar.gz snapshots found (give --snapshots DIR)" >&2
  exit 1
fi
SNAP="$(cd "$SNAP" && pwd)"
mkdir -p "$DEST"
DEST="$(cd "$DEST" && pwd)"
step() { printf '[real-target] %s\n' "$*"; }

# 1. The framework checkouts. MindSpeed-MM becomes a git repo (the agent works on a branch/worktree of it).
for name in MindSpeed-MM MindSpeed; do
  if [ -d "$DEST/$name" ]; then
    step "$name: present ($DEST/$name)"
  else
    step "$name: unpacking $SNAP/$name.tar.gz"
    tmp="$(mktemp -d "$DEST/.unpack.XXXXXX")"
    tar -xzf "$SNAP/$name.tar.gz" -C "$tmp"
    mv "$tmp/$name" "$DEST/$name"
    rmdir "$tmp"
  fi
done
if [ ! -d "$DEST/MindSpeed-MM/.git" ]; then
  step "MindSpeed-MM: git init + snapshot commit"
  git -C "$DEST/MindSpeed-MM" init -q -b main
  git -C "$DEST/MindSpeed-MM" add -A
  git -C "$DEST/MindSpeed-MM" -c user.name=msmigrate -c user.email=msmigrate@localhost \
    commit -q -m "MindSpeed-MM snapshot from $(basename "$SNAP")/MindSpeed-MM.tar.gz"
else
  step "MindSpeed-MM: git checkout present"
fi

# 2. The runtime venv. The pins below are MM's own (pyproject) for torch/transformers; the rest is what the FSDP2
# plugin route imports on CPU. torchvision is MM's own dependency too, pinned to the release built for torch 2.7.1
# (transformers 4.57's AutoProcessor of the Qwen-VL/GLM-4V/InternVL families builds a video processor that needs it,
# and MM's data path needs AutoProcessor). Left out: torch_npu (breaks `import torch` without CANN).
REQS=(
  "torch==2.7.1" "torchvision==0.22.1" "transformers==4.57.0" "accelerate>=1.0" "safetensors>=0.4.3"
  "torchdata>=0.11" "datasets>=3.0" "pillow>=10.3" "numpy>=1.26" "einops>=0.8" "peft>=0.15" "pydantic>=2.10.4"
  "pyyaml>=6.0.1" "num2words>=0.5.13" "sentencepiece>=0.2" "protobuf>=4.25" "packaging>=23" "psutil>=5.9"
  "scipy>=1.11" "av>=12"
)
stamp_want="$(printf '%s\n' "${REQS[@]}" | sha256sum | cut -c1-16)"
VENV="${RUNTIME:-$DEST/runtime}"
if [ ! -x "$VENV/bin/python" ]; then
  step "runtime: creating venv $VENV"
  "${PYTHON:-python3}" -m venv "$VENV"
fi
VENV="$(cd "$VENV" && pwd)"
if [ "$(cat "$VENV/.msmigrate-real-runtime" 2>/dev/null)" = "$stamp_want" ]; then
  step "runtime: up to date ($VENV)"
else
  step "runtime: installing torch 2.7.1 + transformers 4.57.0 and MM's CPU needs (first time: several GB, minutes)"
  # torch==2.7.1 is above this machine's local wheel cap on some hosts; PIP_CONSTRAINT="" lifts only that cap.
  PIP_CONSTRAINT="" "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
  PIP_CONSTRAINT="" "$VENV/bin/python" -m pip install -q "${REQS[@]}"
  printf '%s\n' "$stamp_want" > "$VENV/.msmigrate-real-runtime"
fi
if [ -n "$RUNTIME" ] && [ "$VENV" != "$DEST/runtime" ]; then
  ln -sfn "$VENV" "$DEST/runtime"
fi

# 3. `mindspeed` importable: a .pth naming MindSpeed checkouts (their code stays where it is; no pip deps pulled).
# One runtime may serve several targets: this one's path goes first, paths that no longer exist are dropped (Python
# skips missing .pth entries anyway), so removing one target never breaks another.
site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
pth="$site/msmigrate_real_mindspeed.pth"
{ printf '%s\n' "$DEST/MindSpeed"; [ -f "$pth" ] && while IFS= read -r line; do
    [ "$line" != "$DEST/MindSpeed" ] && [ -d "$line" ] && printf '%s\n' "$line"; done < "$pth"; true; } > "$pth.new"
mv "$pth.new" "$pth"
step "runtime: mindspeed -> $DEST/MindSpeed"

step "checking: import mindspeed_mm.fsdp.train.trainer (NON_MEGATRON=true, CPU)"
(cd "$DEST/MindSpeed-MM" && NON_MEGATRON=true "$VENV/bin/python" -c \
  'import torch, transformers, mindspeed, mindspeed_mm.fsdp.train.trainer as t; print("[real-target] torch", torch.__version__, "transformers", transformers.__version__)')

echo "target $DEST/MindSpeed-MM"
echo "runtime_python $DEST/runtime/bin/python"
