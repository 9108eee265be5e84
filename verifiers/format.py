"""Format rewards: does the response have the required shape? Each check returns a Verdict
(1.0 `correct` when the format holds, 0.0 `format_error` with the reason when it does not).

The checks are plain functions `check(response, ...)`; `Tags(...)` and `Boxed()` wrap them as
picklable reward functions `fn(response, gold) -> Verdict` for `verifiers.compose.weighted`.
All scans are linear in the response length.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rlvr.verifiers.math.markers import find_boxes
from rlvr.verifiers.math.options import VerifierTypeError
from rlvr.verifiers.verdict import Outcome, Verdict, VerifierError

_TAG_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")


def _check_response(response: object) -> str:
    if not isinstance(response, str):
        raise VerifierTypeError(f"response must be a str, got {type(response).__name__}")
    return response


def _ok(detail: str) -> Verdict:
    return Verdict(1.0, Outcome.CORRECT, detail)


def _bad(detail: str) -> Verdict:
    return Verdict(0.0, Outcome.FORMAT_ERROR, detail)


def has_tags(
    response: str,
    tags: tuple[str, ...] | list[str] = ("think", "answer"),
    *,
    in_order: bool = True,
    exactly_once: bool = True,
    nonempty: bool = True,
) -> Verdict:
    """Every `<tag>...</tag>` pair is present and closed; by default once each, in the given order,
    and not empty. `has_tags(r, ["think", "answer"])` is the usual reasoning-then-answer format."""
    _check_response(response)
    if isinstance(tags, str) or not tags or not all(isinstance(t, str) and _TAG_NAME.fullmatch(t) for t in tags):
        raise VerifierError(f"tags must be a non-empty list of tag names, got {tags!r}")
    last_end = -1
    for tag in tags:
        open_, close = f"<{tag}>", f"</{tag}>"
        count_open, count_close = response.count(open_), response.count(close)
        if count_open == 0 or count_close == 0:
            return _bad(f"missing <{tag}>...</{tag}>")
        if exactly_once and (count_open > 1 or count_close > 1):
            return _bad(f"<{tag}> appears more than once")
        start = response.find(open_)
        end = response.find(close, start + len(open_))
        if end < 0:
            return _bad(f"<{tag}> is not closed")
        if nonempty and not response[start + len(open_) : end].strip():
            return _bad(f"<{tag}> is empty")
        if in_order and start < last_end:
            return _bad(f"<{tag}> is out of order")
        last_end = end + len(close)
    return _ok(f"tags {', '.join(tags)} present")


def boxed_present(response: str, *, exactly_one: bool = False) -> Verdict:
    """A closed `\\boxed{...}` (or `\\fbox{}`) with content; `exactly_one` also forbids several."""
    _check_response(response)
    boxes, unclosed, too_many = find_boxes(response, 2 if exactly_one else 1)
    if unclosed and not boxes:
        return _bad("\\boxed{ is never closed")
    if not boxes:
        return _bad("no \\boxed{} answer")
    if exactly_one and (len(boxes) > 1 or too_many):
        return _bad("several different \\boxed{} answers")
    return _ok("boxed answer present")


def within_length(response: str, max_chars: int) -> Verdict:
    """The response is at most `max_chars` characters long."""
    _check_response(response)
    if not isinstance(max_chars, int) or isinstance(max_chars, bool) or max_chars < 1:
        raise VerifierError(f"max_chars must be a positive int, got {max_chars!r}")
    if len(response) > max_chars:
        return _bad(f"{len(response)} characters, more than {max_chars}")
    return _ok(f"{len(response)} characters")


@dataclass(frozen=True)
class Tags:
    """Reward function form of `has_tags`: `Tags(("think", "answer"))(response, gold)`."""

    tags: tuple[str, ...] = ("think", "answer")
    in_order: bool = True
    exactly_once: bool = True

    def __call__(self, response: str, gold: object = None) -> Verdict:
        return has_tags(response, self.tags, in_order=self.in_order, exactly_once=self.exactly_once)


@dataclass(frozen=True)
class Boxed:
    """Reward function form of `boxed_present`."""

    exactly_one: bool = False

    def __call__(self, response: str, gold: object = None) -> Verdict:
        return boxed_present(response, exactly_one=self.exactly_one)
