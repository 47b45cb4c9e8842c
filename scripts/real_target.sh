#!/usr/bin/env bash
# Builds a real MindSpeed-MM target for msmigrate: DEST/MindSpeed-MM (a git checkout of the snapshot, `mindspeed`
# importable through the runtime) and DEST/runtime (a venv with torch 2.7.1 + transformers 4.57.0 and the rest of
# what MM's FSDP2 plugin route imports on CPU; never torch_npu). Idempotent: a finished step is skipped.
#
#   bash scripts/real_target.sh DEST [--snapshots DIR] [--runtime VENV] [--megatron [--megatron-runtime VENV2]]
#
#   --snapshots DIR  folder holding MindSpeed-MM.tar.gz and MindSpeed.tar.gz (default: shared/realmm found next to
#                    or above this repository, or $MSMIGRATE_REALMM_DIR)
#   --runtime VENV   build/reuse the venv at VENV and link DEST/runtime to it (default DEST/runtime; or
#                    $MSMIGRATE_REAL_RUNTIME). One runtime serves any number of checkouts: the checkout, not the
#                    venv, decides which mindspeed_mm is imported (the trainer runs from the checkout's root).
#   --megatron       also set up the Megatron route (pretrain_vlm.py): `megatron/` from
#                    Megatron-LM-core_v0.12.1.tar.gz copied into the checkout as MM's install guide does (its own
#                    commit), and a second venv layered on the first (torch/transformers are reused, not installed
#                    again) with MM's Megatron-route dependencies. Prints `runtime_python` of that venv instead.
#   --megatron-runtime VENV2  the layered venv (default VENV-megatron; or $MSMIGRATE_REAL_MEGATRON_RUNTIME)
#
# Prints `target <path>` and `runtime_python <path>` last: the two fields a spec needs.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"

DEST=""; SNAP="${MSMIGRATE_REALMM_DIR:-}"; RUNTIME="${MSMIGRATE_REAL_RUNTIME:-}"
MEGATRON=0; MEG_RUNTIME="${MSMIGRATE_REAL_MEGATRON_RUNTIME:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --snapshots) SNAP="$2"; shift 2 ;;
    --runtime) RUNTIME="$2"; shift 2 ;;
    --megatron) MEGATRON=1; shift ;;
    --megatron-runtime) MEGATRON=1; MEG_RUNTIME="$2"; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
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
# unpack TARBALL TOP WHERE [LICENSE_COPY]: TARBALL's folder TOP to WHERE; with LICENSE_COPY, TOP/megatron goes
# there instead, TOP/LICENSE copied into it as TOP/LICENSE_COPY
unpack() {
  local tmp; tmp="$(mktemp -d "$DEST/.unpack.XXXXXX")"
  tar -xzf "$1" -C "$tmp"
  [ -z "${4:-}" ] || cp "$tmp/$2/LICENSE" "$tmp/$2/$4"
  mv "$tmp/$2${4:+/megatron}" "$3"
  rm -rf "$tmp"
}

# 1. The framework checkouts. MindSpeed-MM becomes a git repo (the agent works on a branch/worktree of it).
for name in MindSpeed-MM MindSpeed; do
  if [ -d "$DEST/$name" ]; then
    step "$name: present ($DEST/$name)"
  else
    step "$name: unpacking $SNAP/$name.tar.gz"
    unpack "$SNAP/$name.tar.gz" "$name" "$DEST/$name"
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

if [ "$MEGATRON" = 1 ]; then
  # 4. megatron/ in place. MM's install guide copies Megatron-LM core_v0.12.1's megatron/ next to mindspeed_mm; it
  # is committed on its own so the agent's worktrees of the checkout carry it (an untracked copy would be missing
  # from them). Megatron-LM's license goes with the copy.
  [ -f "$SNAP/Megatron-LM-core_v0.12.1.tar.gz" ] || { echo "error: no $SNAP/Megatron-LM-core_v0.12.1.tar.gz" >&2; exit 1; }
  if [ -d "$DEST/MindSpeed-MM/megatron" ]; then
    step "megatron/: present"
  else
    step "megatron/: copying Megatron-LM core_v0.12.1 into the checkout"
    unpack "$SNAP/Megatron-LM-core_v0.12.1.tar.gz" Megatron-LM "$DEST/MindSpeed-MM/megatron" megatron/LICENSE.Megatron-LM
    git -C "$DEST/MindSpeed-MM" add megatron
    git -C "$DEST/MindSpeed-MM" -c user.name=msmigrate -c user.email=msmigrate@localhost \
      commit -q -m "megatron/ from Megatron-LM core_v0.12.1 (MindSpeed-MM install guide)"
  fi

  # 5. The Megatron-route venv, layered on the runtime above: its .pth adds that venv's site-packages (and runs its
  # .pth files, so `mindspeed` resolves the same way) after its own, so torch 2.7.1 / transformers 4.57 are shared
  # and what is installed here shadows the base. Pins: pandas<3 (pandarallel imports pandas internals that 3.x
  # removed), diffusers 0.38.0 (the first release MM accepts; later ones need a huggingface_hub that transformers
  # 4.57 refuses). pybind11 + ninja: Megatron compiles its dataset helper at init. Left out: torch_npu (a CPU shim
  # stands in for it at launch, msmigrate/tools/megatron_cpu/).
  MEG_REQS=(
    "pandas>=2.0,<3" "diffusers==0.38.0" "ftfy>=6.1" "bs4>=0.0.2" "beartype>=0.18" "pandarallel>=1.6.5"
    "qwen_vl_utils>=0.0.8" "imageio>=2.34" "imageio-ffmpeg>=0.5" "peft>=0.19.1" "jsonargparse[all]>=4.40.0"
    "gpytorch>=1.11" "orjson>=3.9" "rich>=13" "pybind11>=2.12" "ninja>=1.11" "wheel>=0.40" "six>=1.16"
    "regex>=2023.0" "decorator>=5.1" "attrs>=23.0" "pytest-mock>=3.12" "scikit-learn>=1.3" "SQLAlchemy>=2.0"
    "numba>=0.59"
  )
  MVENV="${MEG_RUNTIME:-$VENV-megatron}"
  if [ ! -x "$MVENV/bin/python" ]; then
    step "megatron runtime: creating venv $MVENV (layered on $VENV)"
    "${PYTHON:-python3}" -m venv "$MVENV"
  fi
  MVENV="$(cd "$MVENV" && pwd)"
  msite="$("$MVENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  printf 'import site; site.addsitedir(%s)\n' "'$site'" > "$msite/zz_msmigrate_base_runtime.pth"
  mstamp="$(printf '%s\n' "$stamp_want" "${MEG_REQS[@]}" | sha256sum | cut -c1-16)"
  if [ "$(cat "$MVENV/.msmigrate-real-megatron-runtime" 2>/dev/null)" = "$mstamp" ]; then
    step "megatron runtime: up to date ($MVENV)"
  else
    step "megatron runtime: installing MM's Megatron-route dependencies (minutes)"
    PIP_CONSTRAINT="" "$MVENV/bin/python" -m pip install -q "${MEG_REQS[@]}"
    printf '%s\n' "$mstamp" > "$MVENV/.msmigrate-real-megatron-runtime"
  fi
  ln -sfn "$MVENV" "$DEST/runtime-megatron"
  step "checking: import mindspeed.megatron_adaptor, megatron.training, mindspeed_mm.models.vlm_model (CPU shim)"
  (cd "$DEST/MindSpeed-MM" && PYTHONPATH="$here/msmigrate/tools/megatron_cpu/site${PYTHONPATH:+:$PYTHONPATH}" \
    "$MVENV/bin/python" -c 'import torch, mindspeed.megatron_adaptor, megatron.training, mindspeed_mm.models.vlm_model; print("[real-target] megatron route imports on torch", torch.__version__)')
  echo "target $DEST/MindSpeed-MM"
  echo "runtime_python $DEST/runtime-megatron/bin/python"
  exit 0
fi

echo "target $DEST/MindSpeed-MM"
echo "runtime_python $DEST/runtime/bin/python"
