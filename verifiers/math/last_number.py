"""The unmarked value: the last number or math span of a text, read whole (`pi/2`, `√3`, `2π`,
`3 sqrt(2)`, `5 km`), or a hedge of two (`2 or 3`), or what the text denies there. Grammar 2 reads
it only in the lenient mode (`MathOptions(require_marker=False)`) and after a retraction that names
no new marked answer (`final_answer`); `only_number` is the lenient fallback inside an unreadable phrase.

A number glued to letters is part of a word (`AZYUK2A`, `x2`, `5x`), not a number; units and
ordinals after it (`5cm`, `3rd`) are allowed. Of thousands of numbers only the last few are looked
at in Python (a C-level pass keeps them), and every rule reads a window of a few hundred characters.
"""

from __future__ import annotations

import re
from collections import deque

from rlvr.verifiers.math.denials import counterfactual, denied_after, denied_before
from rlvr.verifiers.math.units import TABLE as UNIT_TABLE

_NUMBER = re.compile(  # also "7 425 000" (thousands grouped by spaces) and ".4" (no leading zero)
    r"-?\\[dt]?frac\{-?\d+\}\{\d+\}"
    r"|-?(?<![A-Za-z])(?:[1-9]\d{0,2}(?: \d{3})+(?![\d/])|\d+(?:,\d{3})*|(?<![\w.])(?=\.\d))"
    r"(?:\.\d+)?(?:[eE][-+]?\d+)?(?:/\d+)?(?:\\?%)?"
)  # Rules below run on windows of at most a few hundred characters before or after a candidate,
# so even their backtracking is bounded by a constant per response.
_VALUE = r"(-?\\[dt]?frac\{-?\d+\}\{\d+\}|-?\d+(?:\.\d+)?(?:/\d+)?)"
_HEDGE_FILLER = (
    r"(?:(?:either|maybe|perhaps|possibly|probably|also|even|it|is|could|might|would|be|equal|equals|to|just)\b[\s,]*)*"
)
# "2 or 3", "2, or maybe x = 3", "2 (or possibly 3)": a value, "or", fillers, then the last number
_HEDGE_TAIL = re.compile(
    _VALUE
    + r"[\s,()$]*(?:\\\)[\s,()$]*)?"
    + r"(?:or\b[\s(]*|(?:but\s|and\s)?(?=(?:maybe|perhaps|possibly|probably)\b))"
    + _HEDGE_FILLER
    + r"(?:[A-Za-z](?:_\{?\w{1,3}\}?)?\s*=\s*)?[$(\s]*(?:\\\([$(\s]*)?$",
    re.IGNORECASE,
)
_SPAN_HEDGE = re.compile(  # "either $3$ or $4$" at the end: both spans are the answer
    r"\$([^$\n]{1,80})\$[\s,()]*or\b[\s(]*" + _HEDGE_FILLER + r"\$[^$\n]{1,80}\$$", re.IGNORECASE
)
_OR_WORD = re.compile(r"\bor\b", re.IGNORECASE)
# Letters glued to a number that still leave it a number: units and ordinals (5cm, 3rd)
_UNIT_SUFFIXES = {
    "cm",
    "mm",
    "km",
    "m",
    "kg",
    "g",
    "mg",
    "s",
    "ms",
    "h",
    "hr",
    "hrs",
    "min",
    "mins",
    "sec",
    "secs",
    "ml",
    "l",
    "st",
    "nd",
    "rd",
    "th",
    "ft",
    "in",
    "yd",
    "mi",
    "mph",
    "kph",
    "lb",
    "lbs",
    "oz",
    "am",
    "pm",
    "cc",
}


def _last_math_span(text: str) -> tuple[str, int, int] | None:
    """The last `$...$`/`\\(...\\)`/`\\[...\\]` span: its content, start and end index, found from the end."""
    best: tuple[str, int, int] | None = None
    for open_, close in (("\\(", "\\)"), ("\\[", "\\]")):
        stop = text.rfind(close)
        if stop > 0:
            start = text.rfind(open_, 0, stop)
            if start >= 0 and (best is None or stop > best[2]):
                best = (text[start + 2 : stop], start, stop + 2)
    unescaped = text.replace("\\$", "  ").replace("$$", "$ ")
    dollars = [i for i in (unescaped.rfind("$"),) if i >= 0]
    if dollars and unescaped.count("$") % 2 == 0:
        stop = dollars[0]
        start = unescaped.rfind("$", 0, stop)
        if start >= 0 and (best is None or stop > best[2]):
            best = (text[start + 1 : stop], start, stop + 1)
    return best


def _glued(text: str, m: re.Match) -> bool:
    """A number glued to letters is part of a word (`AZYUK2A`, `x2`, `5x`), not a number; units
    and ordinals after it (`5cm`, `3rd`) are allowed."""
    s = m.start() + (text[m.start()] == "-")
    if text[s] != "\\" and s > 0 and text[s - 1].isalpha():
        return True
    e = m.end()
    j = e
    while j < len(text) and j - e <= 4 and text[j].isalpha():
        j += 1
    if j == e + 1 and text[j : j + 1] == ")" and _OVER_PAREN.search(text[max(0, s - 12) : s]):
        return False  # `-b/(2a)`: a coefficient of a letter in a plain-text formula, taken whole by `_widened`
    return j > e and text[e:j].lower() not in _UNIT_SUFFIXES


_OVER_PAREN = re.compile(r"-?[A-Za-z]\s?/\s?\($")  # `-b/(` before `2a)`
_PI_OVER = re.compile(  # before a number: `pi/`, `pi*r^`, `3 sqrt(`, `sqrt(3)/`, `\u221a` (a window of 20 characters)
    r"(?:\d{1,6}\s?)?(?:(?:\\pi|pi|\u03c0)\s?[/^]|(?:\u221a|\\sqrt|sqrt)\s?\(?)\s?$"
    r"|(?:\d{1,6}\s?)?(?:\u221a|\\sqrt|sqrt)\s?[({]?\d{1,6}[)}]?\s?/\s?$"
    r"|(?:\d{1,6}(?:/\d{1,6})?\s?\*?\s?)?(?:(?:\\pi|pi|\u03c0)\s?\*?\s?)[A-Za-z]\s?\^\s?$",
    re.IGNORECASE,
)
_UNIT_WORD = re.compile(r" ([A-Za-z]{2,12})(?![A-Za-z])")
_TIMES_PI = re.compile(r"\s?(?:\\pi|pi|\u03c0)(?![A-Za-z])(?:\s?/\s?\d{1,6})?", re.IGNORECASE)


def _widened(text: str, m: re.Match) -> tuple[str, int, int]:
    """The number at `m` with a plain-text constant around it: `pi/2`, `\u03c0/3`, `\u221a3`, `2\u03c0`, `3pi/2`."""
    start, end = m.start(), m.end()
    over = _OVER_PAREN.search(text[max(0, start - 12) : start])
    if over and text[end : end + 1].isalpha() and text[end + 1 : end + 2] == ")":
        return text[start - len(over.group(0)) : end + 2], start - len(over.group(0)), end + 2  # -b/(2a)
    before = _PI_OVER.search(text[max(0, start - 20) : start])
    if before:
        start -= len(before.group(0))
        if before.group(0).rstrip().endswith("(") and text[end : end + 1] == ")":
            end += 1
    after = _TIMES_PI.match(text, end)
    if after:
        end = after.end()
    unit = _UNIT_WORD.match(text, end)
    if unit and len(unit.group(1)) > 1 and unit.group(1).lower() in UNIT_TABLE:  # "5 km": the unit is compared
        end = unit.end()
    return text[start:end], start, end


def numbers(text: str) -> list[re.Match]:
    return [m for m in _NUMBER.finditer(text) if not _glued(text, m)]


def last_number(text: str) -> tuple[str | None, str | None, int]:
    """The last number (or the last math span, if it ends after it): (answer, None, its end), or
    (None, what was denied, its end) when the text negates it ("it is certainly not 7")."""
    last = None
    # the last few numbers, kept by a C-level pass: a run of words glued to digits has no number
    for m in reversed(deque(_NUMBER.finditer(text), maxlen=64)):
        if _TIMES_PI.match(text, m.end()) or not _glued(text, m):
            last = m
            break
    span = _last_math_span(text)
    if span is not None and span[0].strip() and (last is None or span[2] >= last.end()):
        if denied_before(text, span[1]) or denied_after(text, span[2]) or counterfactual(text, span[1], span[2]):
            return None, span[0].strip(), span[2]
        hedge = _SPAN_HEDGE.search(text[max(0, span[2] - 300) : span[2]])
        if hedge:  # judged as a hedge later
            return f"{hedge.group(1).strip()} \\text{{ or }} {span[0].strip()}", None, span[2]
        return span[0].strip(), None, span[2]
    if last is None:
        return None, None, len(text)
    number, start, end = _widened(text, last)
    if denied_before(text, start) or denied_after(text, end) or counterfactual(text, start, end):
        return None, number, end
    hedge = _HEDGE_TAIL.search(text[max(0, start - 120) : start])
    if hedge:  # "it is 5 or 6": both numbers are the answer, judged as a hedge later
        return f"{hedge.group(1)} \\text{{ or }} {number}", None, end
    return number, None, end


def only_number(answer: str) -> str | None:
    """The one number in a phrase answer (the fallback if the phrase does not read as maths); none
    if it holds several or an "or": a hedge is never narrowed down to one of its values."""
    if len(answer) > 4000 or _OR_WORD.search(answer):
        return None
    found = {m.group(0) for m in numbers(answer)}
    return found.pop() if len(found) == 1 else None
