"""Judging extracted answers against the gold: the SymPy half of `verify`, which runs inside a
worker process (see `bounded`). Inputs and outputs are plain strings and tuples."""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from verifiers.math.build import TooLarge
from verifiers.math.canon import canon
from verifiers.math.equivalence import same
from verifiers.math.lexer import ParseError
from verifiers.math.nodes import Bracket, Expr, Listing, Node, SetOf, Text, has_decimal
from verifiers.math.normalize import clean
from verifiers.math.options import MathOptions
from verifiers.math.parse import normal_text, parse_answer


@dataclass(frozen=True)
class Judgement:
    """`correct` is None when the grader itself failed (an error, not a wrong answer)."""

    correct: bool | None
    detail: str


# "(B) 12", "B) 12", "\\textbf{(B)} 12": an answer that opens with a multiple-choice letter
# a second choice after the first: "(B) or (C)", "(B) and D"
_OTHER_CHOICE = re.compile(r"\(([A-Za-z])\)|\b(?:or|and)\s+\(?([A-Za-z])\b")
_CHOICE_PREFIX = re.compile(r"\s*(?:\\text(?:bf|rm)?\s*\{\s*)?\(?([A-Za-z])\)(?:\s*\})?(?:\s|$)")


@lru_cache(maxsize=2048)
def _parse(answer: str) -> Node | ParseError:
    """Parsed and canonical form; golds repeat across a group of samples, so this is cached."""
    try:
        return canon(parse_answer(answer))
    except TooLarge as exc:
        return exc
    except ParseError as exc:
        return exc
    except RecursionError:
        return ParseError("answer nested too deeply")


def _short(s: str, n: int = 60) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 3] + "..."


def _is_collection(node: Node) -> bool:
    return isinstance(node, (SetOf, Listing)) and len(node.items) > 1 or isinstance(node, Bracket)


def judge(gold: str, answers: tuple[str, ...], options: MathOptions, fallback: str | None = None) -> Judgement:
    """Whether the extracted `answers` (one, or several boxes) state the `gold` answer;
    `fallback` replaces a single answer that does not read as maths."""
    g = _parse(gold)
    if isinstance(g, ParseError):
        # every answer must match: several different ones are a hedge
        text_match = all(normal_text(clean(gold)) == normal_text(clean(a)) and normal_text(clean(a)) for a in answers)
        return Judgement(text_match, f"reference not readable as maths ({g}); compared as text")
    letter = _choice_letter(g)
    if letter and len(answers) == 1:
        chosen = _CHOICE_PREFIX.match(answers[0])
        if chosen:
            others = {(m.group(1) or m.group(2)).lower() for m in _OTHER_CHOICE.finditer(answers[0], chosen.end())}
            if others - {chosen.group(1).lower()}:  # "(B) or (C)"
                return Judgement(False, "hedged: several choices")
            ok = chosen.group(1).lower() == letter
            return Judgement(ok, f"choice ({chosen.group(1)}) {'is' if ok else 'is not'} the reference ({letter.upper()})")
    parsed = [_parse(a) for a in answers]
    for k, (a, p) in enumerate(zip(answers, parsed)):
        chosen = _CHOICE_PREFIX.match(a)
        if isinstance(p, ParseError) and chosen and a[chosen.end() :].strip():  # "(B) 12" for gold 12
            parsed[k] = _parse(a[chosen.end() :])
    if len(parsed) == 1 and isinstance(parsed[0], ParseError) and fallback:
        answers, parsed = (fallback,), [_parse(fallback)]
    if len(parsed) > 1:
        node = _one_answer(g, parsed, options)
        if node is None:
            return Judgement(False, f"hedged: {len(answers)} different final answers")
        answer_text = " ; ".join(answers)
    else:
        node, answer_text = parsed[0], answers[0]
    if isinstance(node, TooLarge):
        return Judgement(False, f"answer {_short(answer_text)!r}: {node}")
    if isinstance(node, ParseError):
        return Judgement(False, f"answer {_short(answer_text)!r} not readable: {node}")
    if same(g, node, options):
        return Judgement(True, f"{_short(answer_text)!r} matches the reference")
    if isinstance(node, (SetOf, Listing)) and len(node.items) > 1 and not _is_collection(g):
        return Judgement(False, f"hedged: several answers {_short(answer_text)!r} where one is expected")
    return Judgement(False, f"{_short(answer_text)!r} does not match the reference {_short(gold)!r}")


def _choice_letter(g: Node) -> str | None:
    """The letter of a multiple-choice gold (`(B)`, `\\text{B}`, `B`), else None."""
    if isinstance(g, Text) and len(g.text) == 1:
        return g.text
    if isinstance(g, Expr) and g.value.is_Symbol and len(g.value.name) == 1 and g.value.name.isupper():
        return g.value.name.lower()
    return None


def _one_answer(g: Node, parsed: list, options: MathOptions) -> Node | None:
    """Several boxes: one answer if they all agree, a list if the gold is a list, else a hedge."""
    if any(isinstance(p, ParseError) for p in parsed):
        return None if options.hedge == "wrong" else parsed[-1]
    first = parsed[0]
    if all(same(first, p, options) or same(p, first, options) for p in parsed[1:]):
        # `\boxed{1/3} ... \boxed{0.333}`: one answer; judge its exact form, so that the
        # rounded copy adds nothing
        return next((p for p in reversed(parsed) if not has_decimal(p)), parsed[-1])
    if _is_collection(g):
        return Listing(tuple(parsed))
    return parsed[-1] if options.hedge == "last" else None


def judge_job(
    gold: str, answers: tuple[str, ...], options: MathOptions, fallback: str | None = None
) -> tuple[bool | None, str]:
    """The worker-process entry point: never raises; a crash of SymPy is a grader error."""
    try:
        j = judge(gold, answers, options, fallback)
        return j.correct, j.detail
    except RecursionError:
        return False, "answer nested too deeply"
    except Exception as exc:  # noqa: BLE001 - any SymPy failure is reported, not raised
        return None, f"grader failed: {type(exc).__name__}: {_short(str(exc), 120)}"
