#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the whole test suite. Extra arguments go to pytest.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
bash scripts/setup.sh
export TOKENIZERS_PARALLELISM=false
# Everything runs, the learning runs (marker `slow`, about two minutes each) included;
# `bash scripts/test.sh -m "not slow"` leaves them out.
set +e
.venv/bin/python -m pytest -q -rs --durations=15 "$@"
rc=$?
set -e
# pytest's 5 means "no tests collected": that is a failure for us, not a pass.
exit $rc
