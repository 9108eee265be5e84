#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the whole test suite. Extra arguments go to pytest.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
bash scripts/setup.sh
export TOKENIZERS_PARALLELISM=false
# Lint and format first (seconds): a lint error or an unformatted file fails the run like a failed test.
.venv/bin/python -m ruff check .
.venv/bin/python -m ruff format --check .
# Everything runs, the learning runs (marker `slow`, about two minutes each) included;
# `bash scripts/test.sh -m "not slow"` leaves them out.
# Two pytest-xdist workers, one per core of the 2-core machines the suite is sized for (RLVR_TEST_WORKERS=0: one
# process). `--dist loadgroup`: tests/conftest.py keeps what the machine holds once (Ray, the session's vLLM
# server) on one worker.
set +e
.venv/bin/python -m pytest -q -rs --durations=15 -n "${RLVR_TEST_WORKERS:-2}" --dist loadgroup "$@"
rc=$?
set -e
# pytest's 5 means "no tests collected": that is a failure for us, not a pass.
exit $rc
