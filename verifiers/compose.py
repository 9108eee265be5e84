"""Weighted composition of reward functions.

`weighted({"correct": (math.verify, 1.0), "format": (Tags(), 0.2)})` returns a reward function
`fn(response, gold) -> Verdict` whose score is the weighted mean of the component scores (so it
stays in [0, 1]), whose `info["components"]` reports every component (score, outcome, weight,
detail), and whose outcome follows the primary component (the first, unless named). An error in
any component (an `error` verdict, or an exception) makes the whole verdict an error: a grader
failure must never be mistaken for a wrong answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlvr.verifiers.math.options import VerifierTypeError
from rlvr.verifiers.verdict import Outcome, Verdict, VerifierError

RewardFn = Callable[[str, str], Verdict]


@dataclass(frozen=True)
class Weighted:
    """The composed reward function (picklable when its components are)."""

    components: tuple[tuple[str, Callable, float], ...]
    primary: str

    def __call__(self, response: str, gold: str) -> Verdict:
        if not isinstance(response, str):
            raise VerifierTypeError(f"response must be a str, got {type(response).__name__}")
        report: dict[str, dict[str, Any]] = {}
        verdicts: dict[str, Verdict] = {}
        for name, fn, weight in self.components:
            try:
                verdict = fn(response, gold)
            except VerifierError:
                raise  # misuse (bad arguments, incl. VerifierTypeError) is the caller's bug
            except Exception as exc:  # noqa: BLE001 - a crashing grader is an error verdict
                verdict = Verdict(0.0, Outcome.ERROR, f"{type(exc).__name__}: {exc}"[:200])
            if not isinstance(verdict, Verdict):
                raise VerifierTypeError(f"component {name!r} returned {type(verdict).__name__}, not a Verdict")
            verdicts[name] = verdict
            report[name] = {
                "score": verdict.score,
                "outcome": str(verdict.outcome),
                "weight": weight,
                "detail": verdict.detail,
                "info": verdict.info,
            }
        info = {"components": report, "primary": self.primary}
        failed = [name for name, v in verdicts.items() if v.is_error]
        if failed:
            details = "; ".join(f"{n}: {verdicts[n].detail}" for n in failed)
            return Verdict(0.0, Outcome.ERROR, f"component error ({details})", info)
        total = sum(w for _, _, w in self.components)
        score = sum(verdicts[n].score * w for n, _, w in self.components) / total
        primary = verdicts[self.primary]
        return Verdict(min(1.0, max(0.0, score)), primary.outcome, primary.detail, info)


def weighted(components: dict[str, tuple[RewardFn, float]], primary: str | None = None) -> Weighted:
    """Compose reward functions `fn(response, gold) -> Verdict` with non-negative weights."""
    if not isinstance(components, dict) or not components:
        raise VerifierError("components must be a non-empty dict of name -> (fn, weight)")
    parts = []
    for name, spec in components.items():
        if not isinstance(name, str) or not name:
            raise VerifierError(f"component names must be non-empty strings, got {name!r}")
        if not isinstance(spec, tuple) or len(spec) != 2:
            raise VerifierError(f"component {name!r} must be a (fn, weight) pair, got {spec!r}")
        fn, weight = spec
        if not callable(fn):
            raise VerifierTypeError(f"component {name!r}: {fn!r} is not callable")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight < 0:
            raise VerifierError(f"component {name!r}: weight must be a finite number >= 0, got {weight!r}")
        parts.append((name, fn, float(weight)))
    if sum(w for _, _, w in parts) <= 0:
        raise VerifierError("the weights must not all be zero")
    primary = parts[0][0] if primary is None else primary
    if primary not in components:
        raise VerifierError(f"primary {primary!r} is not one of the components {list(components)}")
    return Weighted(tuple(parts), primary)
