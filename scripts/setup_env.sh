#!/usr/bin/env bash
# Creates .venv (if missing) and installs msmigrate with the CPU target runtime.
# CPU torch goes in FIRST and pinned: an unpinned torch pulls a multi-GB CUDA build.
# Prints one line per step and per package pip fetches (pip's full output goes to .venv/setup.log). A re-run with
# nothing changed (same pyproject.toml, torch pin and Python, msmigrate importable from this checkout) installs
# nothing; `--stamp` prints the fingerprint that decides it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
TORCH_VERSION=${MSMIGRATE_TORCH_VERSION:-2.13.0}
STAMP_FILE=.venv/.msmigrate-install-stamp

stamp() { { cat pyproject.toml; echo "torch==$TORCH_VERSION"; python -VV; pwd; } | sha256sum | cut -d' ' -f1; }
say() { echo "setup: $*"; }
pip_install() {  # pip with one progress line per package; on failure the end of the log
  if ! PYTHONUNBUFFERED=1 python -m pip install --progress-bar off "$@" 2>&1 | tee -a .venv/setup.log \
      | awk '/^(Collecting|Successfully installed)/ { print "  " $0; fflush() }'; then
    say "pip failed; the end of .venv/setup.log:"
    tail -n 30 .venv/setup.log
    exit 1
  fi
}

if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $("$PY" -V)"
  "$PY" -m venv .venv
fi
. .venv/bin/activate
if [ "${1:-}" = "--stamp" ]; then stamp; exit 0; fi

if [ -f "$STAMP_FILE" ] && [ "$(cat "$STAMP_FILE")" = "$(stamp)" ] \
    && python -c "import msmigrate, torch, pathlib, sys; sys.exit(pathlib.Path(msmigrate.__file__).resolve().parents[1] != pathlib.Path.cwd().resolve())" 2>/dev/null; then
  say ".venv is up to date (pyproject.toml and the torch pin unchanged): nothing to install"
  exit 0
fi
: > .venv/setup.log
say "upgrading pip"
pip_install -q --upgrade pip
if ! python -c "import torch" >/dev/null 2>&1; then
  say "installing torch==$TORCH_VERSION (CPU build; the largest download, a minute or more)"
  pip_install "torch==$TORCH_VERSION"
fi
say "installing msmigrate with the runtime and dev extras (editable)"
pip_install -e ".[runtime,dev]"
stamp > "$STAMP_FILE"
say "done; activate with: . .venv/bin/activate"
