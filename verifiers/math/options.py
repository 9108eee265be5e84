"""Policy choices of the math verifier, with their documented defaults."""

from __future__ import annotations

import re
from dataclasses import dataclass

from rlvr.verifiers.verdict import VerifierError


class VerifierTypeError(VerifierError, TypeError):
    """A verifier got an argument of the wrong type (catchable as either base class)."""


PERCENT_POLICIES = ("either", "number", "fraction")
ANGLE_POLICIES = ("either", "degrees")
HEDGE_POLICIES = ("wrong", "last")


@dataclass(frozen=True)
class MathOptions:
    """How `verifiers.math.verify` decides. Frozen and hashable: it travels to the worker processes.
    There is no numeric tolerance: the numeric policy is stated in `verifiers.math.decimals`.

    percent: gold `25\\%` accepts `25\\%`, `25` and, under "either" (default), also `0.25`;
        "number" accepts only 25 (the sign is dropped), "fraction" only 0.25 (`%` means /100).
    angles: gold `30^\\circ` accepts `30`; under "either" (default) also `\\pi/6` (and a radian gold
        accepts the same angle written in degrees); "degrees" compares the numbers only.
    min_answer_digits: a decimal answer approximating an exact gold without a finite decimal
        expansion (`0.3333` for `1/3`) must show at least this many significant digits.
    round_to_gold: a decimal gold with at least `round_min_digits` significant digits also accepts
        an exact answer without a finite expansion that rounds to it (`3.14` accepts `\\pi`;
        never another decimal: `3.1416` is not `3.14`; see `decimals`, rule 4).
    hedge: "wrong" (default) scores several different final answers (`\\boxed{3}` ... `\\boxed{4}`)
        as incorrect, unless the text between them retracts the earlier one ("wait", "mistake"):
        then only the boxes after the retraction count; "last" always takes the last one.
    timeout_s: wall-clock bound of one call, the extraction in the calling thread and waiting for a
        worker included. A judge that runs past it on the model's answer scores it `incorrect`
        ("timeout: ..."); a pool too busy to give the judge half of it is an `error` (see `api`).
    isolate: run SymPy in worker processes that are killed on the deadline (default). False runs
        in the calling thread, guarded against hostile input but without a hard deadline.
    max_response_chars: only the last this many characters of a response are searched for the
        answer (final answers come last), which bounds extraction time on giant responses.
    require_marker: True (default, what RL rewards need): an answer exists only where the text
        marks it (a box, answer tags, "the answer is", "Answer:", or `answer_patterns`); False is the
        lenient mode for grading other people's formats: the last number or math span stands in for a
        missing marker, and the verdict's detail says "lenient".
    answer_patterns: extra markers, as regular expressions whose group 1 is the answer (`r"####\\s*(\\S+)"`
        for GSM8K's); tried after the built-in markers, the last match counting.
    """

    percent: str = "either"
    angles: str = "either"
    min_answer_digits: int = 4
    round_to_gold: bool = True
    round_min_digits: int = 2
    hedge: str = "wrong"
    timeout_s: float = 0.8
    max_answer_chars: int = 2000
    max_boxes: int = 16
    max_response_chars: int = 200_000
    isolate: bool = True
    require_marker: bool = True
    answer_patterns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name, allowed in (("percent", PERCENT_POLICIES), ("angles", ANGLE_POLICIES), ("hedge", HEDGE_POLICIES)):
            if getattr(self, name) not in allowed:
                raise VerifierError(f"MathOptions.{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if not 0 < self.timeout_s <= 60:
            raise VerifierError(f"MathOptions.timeout_s must be in (0, 60], got {self.timeout_s!r}")
        if not isinstance(self.answer_patterns, tuple) or not all(isinstance(p, str) for p in self.answer_patterns):
            raise VerifierError("MathOptions.answer_patterns must be a tuple of regular expressions (str)")
        for pattern in self.answer_patterns:
            try:
                if re.compile(pattern).groups < 1:
                    raise VerifierError(f"MathOptions.answer_patterns: {pattern!r} has no group for the answer")
            except re.error as exc:
                raise VerifierError(
                    f"MathOptions.answer_patterns: {pattern!r} is not a regular expression ({exc})"
                ) from None
        for name in ("min_answer_digits", "round_min_digits", "max_answer_chars", "max_boxes", "max_response_chars"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise VerifierError(f"MathOptions.{name} must be a positive int, got {value!r}")
