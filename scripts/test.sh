#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the whole test suite. Extra arguments go to pytest.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
bash scripts/setup.sh
export TOKENIZERS_PARALLELISM=false
# The learning runs (marker `slow`, minutes each) join with RLVR_SLOW_TESTS=1 or `-m slow`.
select=(-m "not slow")
if [ "${RLVR_SLOW_TESTS:-0}" = 1 ] || [[ " $* " == *" -m "* ]]; then select=(); fi
set +e
.venv/bin/python -m pytest -q -rs --durations=15 "${select[@]}" "$@"
rc=$?
set -e
# pytest's 5 means "no tests collected": that is a failure for us, not a pass.
exit $rc
