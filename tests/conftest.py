"""Shared fixtures. Real components only: a real Docker engine, real vLLM, real tiny models.
Where a component cannot run on this machine the test is skipped with the reason; under CI
(CI=true, where .ci/run has installed everything) a missing component is a failure instead."""
from __future__ import annotations

import os

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(condition: bool, reason: str) -> None:
    """Skip when a component is missing locally; fail under CI, where setup must provide it."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"required component missing under CI: {reason}")
    pytest.skip(reason)
