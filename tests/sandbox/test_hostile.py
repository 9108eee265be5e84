"""The hostile suite (the same one `rlvr sandbox check` prints) against a real Docker engine: every
attack ends with its status, the next run finds a clean container, the host is unharmed."""

from __future__ import annotations

import pytest

from rlvr.sandbox import unavailable_reason
from rlvr.sandbox.check import format_table, run_suite
from rlvr.sandbox.hostile import CASES
from tests.conftest import require

pytestmark = pytest.mark.docker


def test_hostile_suite():
    reason = unavailable_reason()
    require(reason is None, reason or "")
    outcomes, host = run_suite(CASES)
    table = format_table(outcomes)
    assert [o.case for o in outcomes] == [c.name for c in CASES]
    assert all(o.passed for o in outcomes), table
    assert not host, host
