"""Judging extracted answers against the gold: the SymPy half of `verify`, which runs inside a
worker process (see `bounded`). Inputs and outputs are plain strings and tuples.

Rules (issue #27), each because RL finds whatever pays without solving:
- A false statement is no answer: an equation between constants must be true at every `=`
  (`7 = 5` for gold 5 is wrong; `5 = 5`, `2 + 3 = 5` and `x = 4/2 = 2` state 5, 5 and 2). Two
  constants agree when `same` accepts them either way round (`\\frac13 = 0.333` is a rounding
  written as `=`, which is no lie).
- A denial (`\\text{not } 5`, see `parse.Denied`) is wrong, and no fallback number replaces it.
- Labels: `|AB| = 1` against `1`, `V_1:V_2 = 11:21` against `\\frac{11}{21}`, and the reverse,
  compare the values (`parse.split_label`); when both sides carry a label, the labels must be
  the same (up to `|...|`): `|CD| = 1` is not an answer to `|AB| = 1`.
- A gold that is a list reads the answer's `1,234` as two items (`parse_answer(thousands=False)`).
- Slow or huge answers: a judge that runs out of the worker's memory scores the answer wrong (it
  asked for too much); only an unexpected exception is a grader error (`correct` None).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from rlvr.verifiers.math.build import TooLarge
from rlvr.verifiers.math.canon import canon
from rlvr.verifiers.math.equivalence import same
from rlvr.verifiers.math.lexer import ParseError
from rlvr.verifiers.math.nodes import Bracket, Expr, Listing, Node, Relation, SetOf, Text, has_decimal
from rlvr.verifiers.math.normalize import clean
from rlvr.verifiers.math.options import MathOptions
from rlvr.verifiers.math.parse import Denied, normal_text, parse_answer, split_label
from rlvr.verifiers.math.words import APPROXIMATE_RE


@dataclass(frozen=True)
class Judgement:
    """`correct` is None when the grader itself failed (an error, not a wrong answer)."""

    correct: bool | None
    detail: str


# "(B) 12", "B) 12", "\\textbf{(B)} 12": an answer that opens with a multiple-choice letter
# a second choice after the first: "(B) or (C)", "(B) and D"
_OTHER_CHOICE = re.compile(r"\(([A-Za-z])\)|\b(?:or|and)\s+\(?([A-Za-z])\b")
_CHOICE_PREFIX = re.compile(r"\s*(?:\\text(?:bf|rm)?\s*\{\s*)?\(?([A-Za-z])\)(?:\s*\})?(?:\s|$)")


class FalseStatement(ParseError):
    """An equation between constants that are not equal (`7 = 5`)."""


_AGREE = MathOptions()  # constants in one equation agree under the default policy


@lru_cache(maxsize=2048)
def _parse(answer: str, thousands: bool = True, strict: bool = False) -> Node | ParseError:
    """Parsed and canonical form; golds repeat across a group of samples, so this is cached.
    `strict` for a model's answer (its words must be in the grammar's classes, see `words`)."""
    try:
        node = parse_answer(answer, thousands, strict)
        if _false_statement(node):
            return FalseStatement("a false statement: its two sides are different numbers")
        return canon(node)
    except TooLarge as exc:
        return exc
    except ParseError as exc:
        return exc
    except RecursionError:
        return ParseError("answer nested too deeply")
    except (ArithmeticError, ValueError, TypeError, AttributeError, IndexError, KeyError) as exc:
        if not strict:
            raise  # the reference itself: the grader's failure
        # a model's text that breaks the reader is unreadable, never an `error` (which would take it
        # out of training): the detail names the exception so that the reader can be mended
        return ParseError(f"the reader failed on it ({type(exc).__name__})")


def _false_statement(node: Node) -> bool:
    """Whether `node` (before canon: a chain keeps every part) equates two different constants."""
    if isinstance(node, (Listing, SetOf)):
        return any(_false_statement(x) for x in node.items)
    if not isinstance(node, Relation):
        return False
    for left, op, right in zip(node.parts, node.ops, node.parts[1:]):
        if op != "=" or not (_constant(left) and _constant(right)):
            continue
        x, y = canon(left), canon(right)
        if not (same(x, y, _AGREE) or same(y, x, _AGREE)):
            return True
    return False


def _constant(node: Node) -> bool:
    return isinstance(node, Expr) and not node.value.free_symbols


def _labelled(answer: str, thousands: bool = True, strict: bool = False) -> tuple[str | None, Node | ParseError]:
    """(label, value) of `|AB| = 1`-like answers whose value is a constant, else (None, whole)."""
    split = split_label(answer)
    if split is not None:
        value = _parse(split[1], thousands, strict)
        if isinstance(value, Expr) and not value.value.free_symbols:
            return split[0], value
        if isinstance(value, FalseStatement):
            return split[0], value
    return None, _parse(answer, thousands, strict)


def _same_label(a: str, b: str) -> bool:
    if "".join(a.split()) == "".join(b.split()):
        return True
    x, y = _parse(a.strip("|")), _parse(b.strip("|"))
    return isinstance(x, Expr) and isinstance(y, Expr) and x.value == y.value


def _short(s: str, n: int = 60) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 3] + "..."


def _is_collection(node: Node) -> bool:
    return isinstance(node, (SetOf, Listing)) and len(node.items) > 1 or isinstance(node, Bracket)


def judge(gold: str, answers: tuple[str, ...], options: MathOptions, fallback: str | None = None) -> Judgement:
    """Whether the extracted `answers` (one, or several boxes) state the `gold` answer;
    `fallback` replaces a single answer that does not read as maths."""
    g_label, g = _labelled(gold)
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
            verb = "is" if ok else "is not"
            return Judgement(ok, f"choice ({chosen.group(1)}) {verb} the reference ({letter.upper()})")
    thousands = not (_is_collection(g) or isinstance(g, Listing))  # gold `1, 234`: `1,234` is two items
    labelled = [_labelled(a, thousands, strict=True) for a in answers]
    if g_label is not None and any(lab is not None and not _same_label(g_label, lab) for lab, _ in labelled):
        return Judgement(False, f"the answer names another quantity than the reference ({_short(g_label)})")
    parsed = [p for _, p in labelled]
    for k, (a, p) in enumerate(zip(answers, parsed)):
        chosen = _CHOICE_PREFIX.match(a)
        if isinstance(p, ParseError) and chosen and a[chosen.end() :].strip():  # "(B) 12" for gold 12
            parsed[k] = _parse(a[chosen.end() :], thousands, True)
    if not has_decimal(g) and any(APPROXIMATE_RE.search(a) for a in answers):
        return Judgement(False, f"an approximate answer for an exact reference ({_short(' ; '.join(answers))!r})")
    if any(isinstance(p, Denied) for p in parsed):
        return Judgement(False, f"denied: {next(p for p in parsed if isinstance(p, Denied))}")
    if any(isinstance(p, FalseStatement) for p in parsed):
        return Judgement(False, f"answer {_short(' ; '.join(answers))!r} is a false statement")
    if len(parsed) == 1 and isinstance(parsed[0], ParseError) and fallback:
        answers, parsed = (fallback,), [_parse(fallback, thousands, True)]
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
    """The worker-process entry point: never raises. A crash is the grader's failure (`correct`
    None, an `error`) only when the reference alone crashes it too; a crash that only this answer
    brings is charged to the answer (wrong, the exception named): a model's text never makes an
    `error`, which would take it out of training."""
    try:
        j = judge(gold, answers, options, fallback)
        return j.correct, j.detail
    except RecursionError:
        return False, "answer nested too deeply"
    except MemoryError:
        return False, "answer too large: the judge ran out of memory"
    except Exception as exc:  # noqa: BLE001 - any SymPy failure is reported, not raised
        what = f"{type(exc).__name__}: {_short(str(exc), 120)}"
        try:
            judge(gold, (gold,), options)
        except Exception:  # noqa: BLE001 - the reference breaks the grader by itself
            return None, f"grader failed: {what}"
        return False, f"the grader failed on this answer, not on the reference ({what}): scored wrong"
