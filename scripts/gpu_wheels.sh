#!/usr/bin/env bash
# The wheels the GPU machine lacks, downloaded into .whl/ here, for scripts/gpu_check.sh to install
# there (the machine has no network; a call carries at most 64 MiB, so these must stay small).
#
#   bash scripts/gpu_wheels.sh          # download into .whl/ (about 31 MiB), then list them with sizes
#   bash scripts/gpu_wheels.sh --plan   # the wheels, nothing downloaded
#
# Its image (Python 3.12, torch with CUDA, transformers 5.17, peft, accelerate, numpy, pyarrow, ...)
# lacks gymnasium, the docker SDK, trl, datasets and their small dependencies; transformers,
# tokenizers and peft travel at the versions the project pins. pandas (datasets needs it) is installed
# there only where the image has none. Versions: the project's pins, the rest as this checkout's venv
# has them. Pure-Python or manylinux x86_64 wheels for CPython 3.12, no dependencies resolved.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WHEELS=(
  gymnasium==1.4.0 farama-notifications==0.0.6 docker==7.1.0
  transformers==5.19.0 tokenizers==0.23.3 peft==0.21.2
  trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 xxhash==4.1.0 pandas==3.1.1
)
LIMIT_MIB=60

if [ "${1:-}" = "--plan" ]; then
  printf '%s\n' "${WHEELS[@]}"
  exit 0
elif [ $# -gt 0 ]; then
  echo "gpu_wheels: error: unknown argument $1 (only --plan)" >&2
  exit 2
fi

if [ -n "${PYTHON:-}" ]; then PY=$PYTHON
elif [ -x "$ROOT/.venv/bin/python" ]; then PY="$ROOT/.venv/bin/python"
else PY=python3
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
