"""Rewards that check work: math equivalence (SymPy), code against tests (sandbox), format checks,
weighted composition, a judge model's grade (`verifiers.judge`). Never imports envs or trainers.

Submodules load lazily (`verifiers.math` imports SymPy), so `import verifiers` stays cheap:
`from verifiers import math` / `verifiers.math.verify(...)`, `verifiers.format.has_tags(...)`,
`verifiers.compose.weighted(...)` or `verifiers.weighted(...)`.
"""

from __future__ import annotations

import importlib
from typing import Any

from rlvr.verifiers.verdict import Outcome, Verdict, VerifierError

_SUBMODULES = {"math", "code", "format", "compose", "judge"}
_NAMES = {
    "weighted": "rlvr.verifiers.compose",
    "has_tags": "rlvr.verifiers.format",
    "boxed_present": "rlvr.verifiers.format",
}

__all__ = ["Outcome", "Verdict", "VerifierError", *sorted(_SUBMODULES), *sorted(_NAMES)]


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"rlvr.verifiers.{name}")
    if name in _NAMES:
        return getattr(importlib.import_module(_NAMES[name]), name)
    raise AttributeError(f"module 'verifiers' has no attribute {name!r}")
