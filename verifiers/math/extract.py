"""Finding the final answer in a model's response.

In order: the `<answer>` tags (the last pair) narrow the text; then every `\\boxed{}`/`\\fbox{}`
in it (a box inside a box is one box; several different ones are a hedge, judged later, unless
a retraction such as "wait, that is wrong" comes between them: then only the later ones count);
else the last "the answer is ..." / "Answer:" phrase; else the tag contents; else the last
number (or the last `$...$` span that holds it). A box after the `<answer>` tags is a second
final answer. Text inside `<think>...</think>` is skipped when an answer follows it.

Time: every scan here is linear in the response length. No regex has nested or adjacent
overlapping quantifiers over unbounded text (the old answer-phrase pattern, `\\s*\\**\\s*:?\\s*`,
took 246 s on "Final answer" and 1,000 spaces): trigger words are found by a literal pattern and
what follows them by single-class runs; look-backs and look-aheads use windows of at most a few
hundred characters; of thousands of numbers or boxes only the last few are examined in Python.

Rules (issue #27: RL finds whatever pays without solving), each with its reason:
- Denial: an answer the text negates is not the answer. A candidate (box, phrase, last number)
  in a clause with "not", "n't", "never", "cannot", "impossible", "rule out", "no way", `\\ne`,
  or after a judgement ("a common mistake is to answer"), or followed by "is not"/"fails", is
  denied, and so is one asked as a question ("the answer is 5?"); the verdict is `incorrect`
  ("denied: ..."), never a fallback to another number. A
  clause ends at punctuation and linking words (so, but, since, unless, `=` ...); a copula after
  the negation keeps the candidate ("the number of integers not divisible by 3 is 667"), and so
  do "not hard", "not less than". A phrase answer "7, not 5" is 7; "not 5 but 6" is 6; a trailing
  remark in words is dropped ("12 (the least common multiple)" is 12).
- Retraction: text after the final answer that takes it back ("no,", "wait", "actually",
  "scratch that", "I misread") followed by a new answer makes that the answer (after a box only
  an answer phrase counts, since checking work after a box is common); a retraction with no new
  answer ("... was 20, but that was wrong") leaves none. An answer phrase after the last box
  with a different value is a second final answer: a hedge.
- Hedges: "2 or 3", "either 2 or 3", "x = 2, or maybe x = 3", "2 (or possibly 3)", "2, maybe 3" give both
  values, judged later as several answers (wrong unless the gold is that list). A phrase answer
  that does not read as maths falls back only to the one number inside it, never to one value of
  a hedge.
- A number glued to letters is part of a word (`AZYUK2A`, `x2`, `5x`): not a number; units and
  ordinals after it (`5cm`, `3rd`) are allowed; `pi/2`, `\u03c0/3`, `\u221a3`, `2\u03c0`, `pi^2`,
  `3 sqrt(2)` are taken whole, and so is a unit word after the last number (`5 km`), which the
  judge then compares (see `units`).
- Struck-out text (`~~5~~ 6`, `\\sout{5}`, `\\cancel{5}`) is retracted: removed before the search.
- A counterfactual the sentence denies ("if the answer were 3, ... which is impossible", "had we
  counted twice, we would get 12"), an answer phrase inside a supposition ("Suppose the answer is
  5. Then ... a contradiction"), another's claim judged wrong ("the textbook says 15, which is a
  typo", "answer 11 was rejected", "many students answer 20; they are mistaken") and a phrase
  answer judged in place ("4 (incorrect, see below)", "the claim that the answer is 9 is false")
  are denials; "if ... we would get 14" is a hypothetical, not an answer. "8? No \u2014 9" is 9.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

from rlvr.verifiers.math.units import TABLE as UNIT_TABLE

_BOX = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
_BRACE = re.compile(r"[{}\\]")
_STRUCK = re.compile(r"~~[^~\n]{1,200}~~|\\(?:sout|st|cancel|xcancel|bcancel)\{[^{}]{0,200}\}")
# The words that open an answer phrase; what must follow them ("is", ":", a heading's newline)
# is checked by a plain scan (`_phrase_end`), never by nested whitespace quantifiers.
_TRIGGER = re.compile(r"answers?|option|choice", re.IGNORECASE)
_SKIP_BLANK = re.compile(r"[\s*]*")  # one run of whitespace and bold marks: a single quantifier
_SKIP_HEADING = re.compile(r"[\s*:]*")
_SENTENCE_END = re.compile(r"\.(?:\s|$)|\s(?:because|since|which|where|so that|as)\s|;|\bI hope\b", re.IGNORECASE)
_NUMBER = re.compile(  # also "7 425 000" (thousands grouped by spaces) and ".4" (no leading zero)
    r"-?\\[dt]?frac\{-?\d+\}\{\d+\}"
    r"|-?(?<![A-Za-z])(?:[1-9]\d{0,2}(?: \d{3})+(?![\d/])|\d+(?:,\d{3})*|(?<![\w.])(?=\.\d))"
    r"(?:\.\d+)?(?:[eE][-+]?\d+)?(?:/\d+)?(?:\\?%)?"
)
# Words that retract an earlier boxed answer (a self-correction), searched between two boxes.
_RETRACT = re.compile(
    r"\b(?:wait|actually|oops|mistakes?|mistaken|errors?|wrong|incorrect|correct(?:ion|ing|ed)|re-?check\w*|"
    r"recalculat\w*|recomput\w*|re-?do|re-?evaluat\w*|reconsider\w*|revis\w*|scratch that|no[,.;!]|second thought|"
    r"miscount\w*|miscalculat\w*|not (?:right|correct)|instead|should (?:be|have))",
    re.IGNORECASE,
)
_JOINED_SPAN = re.compile(r"\s*(?:,\s*)?(?:(?:or|and)\s*)?(?=\$|\\\()", re.IGNORECASE)
_ALTERNATIVE = re.compile(
    r"(?:\bor\s+(?:maybe\s+|perhaps\s+|possibly\s+)?|could\s+also\s+be\s+|might\s+(?:also\s+)?be\s+|alternatively,?\s+)"
    r"(\$[^$\n]{1,80}\$|-?\d+(?:\.\d+)?(?:/\d+)?)(?![\w^])",
    re.IGNORECASE,
)
# Rules below run on windows of at most a few hundred characters before or after a candidate,
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
# Negation: a candidate in a clause that negates ("it is certainly not 7", "we can rule out 6",
# "impossible for the sum to equal 9", "x \ne 7") is denied, not stated; so is one followed by
# "is not", "fails" ("$-1$ is not a root"). Clauses end at punctuation and at linking words.
_NEG_TOKEN = re.compile(r"\\neq?(?![A-Za-z])|\u2260|!=|=|[A-Za-z]+(?:['\u2019][A-Za-z]+)?|[.;:!?,\n\u2014\u2013]")
_NEGATIONS = {
    "not",
    "never",
    "cannot",
    "neither",
    "nor",
    "impossible",
    "exclude",
    "excludes",
    "excluded",
    "eliminate",
    "eliminates",
    "eliminated",
    "discard",
    "discarded",
    "reject",
    "rejected",
    "\\ne",
    "\\neq",
    "\u2260",
    "!=",
}
# Judgements deny what follows them only through words ("a common mistake is to answer 5"); last
# in the clause they judge what came before ("\boxed{1} (mistake) \boxed{2}" corrects 1).
_JUDGEMENTS = {"mistake", "mistakes", "wrong", "incorrect", "erroneous", "false"}
_RULE = {"rule", "rules", "ruled", "ruling"}  # "rule out"
_NEG_IDIOMS = {  # "not hard to see", "not less than": no denial of what follows
    "hard",
    "difficult",
    "only",
    "just",
    "surprisingly",
    "obvious",
    "clear",
    "too",
    "much",
    "exceed",
    "exceeding",
    "less",
    "more",
    "greater",
    "smaller",
    "larger",
    "fewer",
    "below",
    "above",
    "counting",
    "including",
}
# A copula after the negation makes the candidate the predicate of a subject that holds the
# negation ("the number of integers not divisible by 3 is 667"): stated, not denied.
_COPULAS = {"is", "are", "was", "were", "equals", "equal", "gives", "give", "makes", "becomes"}
_CLAUSE_BREAKS = {
    ".",
    ";",
    ":",
    "!",
    "?",
    ",",
    "\n",
    "\u2014",
    "\u2013",
    "=",
    "so",
    "thus",
    "hence",
    "therefore",
    "but",
    "then",
    "because",
    "since",
    "unless",
    "except",
    "if",
    "when",
    "where",
    "which",
    "and",
    "giving",
    "gives",
    "yields",
    "get",
    "obtain",
    "instead",
}
_NEG_AFTER_VERBS = {"is", "was", "does", "did", "will", "would", "can", "could"}
_NEG_AFTER = {"not", "never", "wrong", "incorrect", "impossible", "rejected", "false", "mistaken"}
_SUPPOSITIONS = {"suppose", "supposing", "assume", "assuming", "if", "hypothetically", "whether"}
_CONDITIONS = {"if", "suppose", "supposing", "assume", "assuming", "were"}
_DENIALS_AFTER = {"contradiction", "absurd", "false", "degenerate"}
_FAILS = {"fails", "failed", "isn't", "wasn't", "doesn't", "didn't", "cannot", "can't", "won't"}
_LEADING_NEGATION = re.compile(
    r"(?:(?:certainly|definitely|surely|clearly|obviously|actually|really|probably|absolutely|simply)\s+)?"
    r"(?:not\b|never\b|no\s+longer\b|\\neq?(?![A-Za-z])|\u2260|!=)",
    re.IGNORECASE,
)
# "4 (incorrect, see below)": an answer judged in place
_JUDGED = re.compile(r"\b(?:incorrect|wrong|not (?:correct|right)|mistaken|false|rejected|a typo)\b", re.IGNORECASE)
_NO_THEN = re.compile(r"\?\s*no\b[\s,:\u2014\u2013-]*", re.IGNORECASE)  # "8? No \u2014 9": the answer after the "no"
_NOT_WORD = re.compile(r"\b(?:not|never)\b", re.IGNORECASE)
_BUT = re.compile(r"\bbut\b(?:\s+(?:rather|instead|it\s+is|it's))?", re.IGNORECASE)
_OR_WORD = re.compile(r"\bor\b", re.IGNORECASE)
# Words after an answer phrase that take it back ("The answer is 2. ... no, it is 3."): stronger
# than `_RETRACT`, since checking work after an answer ("let me recheck: 2*3 = 6") is common.
_RETRACT_PHRASE = re.compile(
    r"\b(?:wait|actually|oops|mistakes?|mistaken|wrong|incorrect|correction|scratch that|on second thought|"
    r"on reflection|misread\w*|mis-\w+|miscount\w*|miscalculat\w*|corrected|not (?:right|correct)|instead)\b"
    r"|\bno[,.;!]",
    re.IGNORECASE,
)
# Words that take back the final answer even when no new one follows ("... was 20, but that was wrong").
_RETRACTED = re.compile(
    r"\b(?:(?:was|is|that's|that is|it's|it is|this is)\s(?:wrong|incorrect|not (?:right|correct)|a mistake|an error)|"
    r"scratch that|I was wrong|misread\w*|I made an? (?:mistake|error)|(?:wrong|incorrect) answer|not the answer|"
    r"which is (?:a typo|wrong|incorrect|false|a mistake|an error)|typo|"
    r"(?:is|are|was|were) (?:mistaken|false|rejected))\b",
    re.IGNORECASE,
)
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


@dataclass(frozen=True)
class Extraction:
    """The candidate final answers found in a response (raw strings, not yet parsed).

    `answers` holds several strings only for several boxes; `method` says where they came from;
    `unclosed` marks a `\\boxed{` that never closes (a truncated answer); `too_many` marks more
    distinct boxes than the options allow (a hedge by definition); `fallback` is the one number
    inside a phrase ("the answer is ...") that does not read as maths; `denied` is a final answer
    that the text negates ("the answer is not 5"): then `answers` is empty and the verdict wrong."""

    answers: tuple[str, ...]
    method: str
    unclosed: bool = False
    too_many: bool = False
    fallback: str | None = None  # the number inside a phrase answer, used if the phrase is unreadable
    denied: str | None = None


def _match_braces(text: str, start: int) -> int:
    """Index just past the `}` closing the `{` at `start`, or -1 if it never closes."""
    close = text.find("}", start + 1)
    if close > 0 and text.find("{", start + 1, close) < 0 and text.find("\\", start + 1, close) < 0:
        return close + 1  # the common flat case, found in C
    depth = 0
    skip = -1
    for m in _BRACE.finditer(text, start):  # only braces and backslashes: a scan in C between them
        i = m.start()
        if i == skip:
            continue
        ch = text[i]
        if ch == "\\":
            skip = i + 1  # the escaped character (`\\{`, `\\}`, `\\\\`) does not count
        elif ch == "{":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return i + 1
    return -1


def _box_spans(text: str, max_distinct: int) -> tuple[list[tuple[str, int, int]], bool, bool]:
    """Top-level boxes in order as (content, start, end), repeats included: (spans, unclosed, too_many)."""
    spans: list[tuple[str, int, int]] = []
    seen: set[str] = set()
    end = 0
    for m in _BOX.finditer(text):
        if m.start() < end:  # a box nested inside the previous one
            continue
        i = m.end()
        while i < len(text) and text[i] == " ":
            i += 1
        if i < len(text) and text[i] == "{":
            close = _match_braces(text, i)
            if close < 0:
                return spans, True, False
            content, end = text[i + 1 : close - 1], close
        else:  # `\boxed 5`: the box holds the next word
            j = i
            while j < len(text) and not text[j].isspace() and text[j] not in "$":
                j += 1
            content, end = text[i:j], j
        content = _unwrap(content.strip())
        key = "".join(content.split())
        if not key:
            continue
        if key not in seen:
            if len(seen) >= max_distinct:
                return spans, False, True
            seen.add(key)
        spans.append((content, m.start(), end))
    return spans, False, False


def _unwrap(content: str) -> str:
    """`\\boxed{\\boxed{5}}` holds 5: a box that is the whole content of another is dropped.
    A few levels only (each is a scan): deeper ones are left to the parser, which drops `\\boxed`."""
    for _ in range(4):
        m = _BOX.match(content)
        if m is None:
            return content
        i = m.end()
        while i < len(content) and content[i] == " ":
            i += 1
        if i >= len(content) or content[i] != "{" or _match_braces(content, i) != len(content):
            return content
        content = content[i + 1 : -1].strip()
    return content


def _distinct(contents) -> list[str]:
    out, seen = [], set()
    for c in contents:
        key = "".join(c.split())
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def find_boxes(text: str, max_distinct: int) -> tuple[list[str], bool, bool]:
    """All distinct top-level `\\boxed{...}`/`\\fbox{...}` contents: (contents, unclosed, too_many)."""
    spans, unclosed, too_many = _box_spans(text, max_distinct)
    return _distinct(c for c, _, _ in spans), unclosed, too_many


def _after_retraction(text: str, spans: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """The boxes after the last retraction written between two boxes (`\\boxed{3}`. Wait, that is
    wrong ... `\\boxed{4}`): a self-correction, so only the later boxes are the answer. A policy
    gains nothing by writing one: it is judged on the last box(es) alone."""
    for k in range(len(spans) - 1, 0, -1):
        if _RETRACT.search(text, spans[k - 1][2], spans[k][1]):
            return spans[k:]
    return spans


def _after_think(text: str) -> str:
    cut = text.rfind("</think>")
    if cut >= 0 and text[cut + 8 :].strip():
        return text[cut + 8 :]
    return text


def _answer_tag(text: str) -> tuple[str, str] | None:
    """The content of the last `<answer>` tag and the text after it."""
    lower = text.lower()
    start = lower.rfind("<answer>")
    if start < 0:
        return None
    stop = lower.find("</answer>", start)
    if stop < 0:
        return text[start + 8 :], ""
    return text[start + 8 : stop], text[stop + 9 :]


def _math_span_at(text: str, start: int) -> tuple[str, int] | None:
    """The `$...$`, `\\(...\\)` or `\\[...\\]` span beginning at `start` and the index after it."""
    for open_, close in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if text.startswith(open_, start):
            stop = text.find(close, start + len(open_))
            while close == "$" and stop > 0 and text[stop - 1] == "\\":  # `$\$0.20$`: an escaped dollar
                stop = text.find(close, stop + 1)
            if stop > start + len(open_):
                return text[start + len(open_) : stop], stop + len(close)
    return None


def _after_final(text: str, start: int) -> bool:
    """Whether "final" and whitespace come right before `start` (a bounded look back)."""
    window = text[max(0, start - 64) : start]
    stripped = window.rstrip()
    return len(stripped) < len(window) and stripped[-5:].lower() == "final"


def _phrase_end(text: str, m: re.Match) -> int | None:
    """Where the answer after the trigger word `m` begins: after "is"/"are", ":" or "=", or after a
    "Final Answer" heading's line break; None when the word opens no answer phrase."""
    j = _SKIP_BLANK.match(text, m.end()).end()
    head = text[j : j + 3].lower()
    for verb in ("is", "are"):
        k = j + len(verb)
        if head.startswith(verb) and not (k < len(text) and (text[k].isalnum() or text[k] == "_")):
            return k
    if j < len(text) and text[j] in ":=":
        return j + 1
    if m.group(0).lower() == "answer" and _after_final(text, m.start()):
        k = _SKIP_HEADING.match(text, m.end()).end()
        if text.find("\n", m.end(), k) >= 0:
            return k
    return None


def _phrase_answer(text: str) -> tuple[str, int, int] | None:
    """The answer after the last "the answer is"/"Answer:", where it starts and where it ends;
    None if there is none. A phrase in a negating clause ("there is no way the answer is 6") is
    denied: its answer is the empty string."""
    last = trigger = None
    for m in _TRIGGER.finditer(text):
        end = _phrase_end(text, m)
        if end is not None:
            last, trigger = end, m.start()
    if last is None:
        return None
    if _denied_before(text, trigger) or _counterfactual(text, trigger, last) or _supposed(text, trigger):
        return "", last, last
    i = _SKIP_HEADING.match(text, last).end()
    span = _math_span_at(text, i)
    if span is not None:  # "$2$ or $-2$": every span joined by or/and/commas is part of the answer
        parts = [span[0].strip()]
        joined = _JOINED_SPAN.match(text, span[1])
        while joined and len(parts) < 8:
            nxt = _math_span_at(text, joined.end())
            if nxt is None:
                break
            parts.append(nxt[0].strip())
            span = nxt
            joined = _JOINED_SPAN.match(text, nxt[1])
        return " \\text{ or } ".join(parts), i, span[1]
    line = text[i : i + 4000].split("\n", 1)[0]
    cut = _SENTENCE_END.search(line)
    answer = (line[: cut.start()] if cut else line).strip().strip("*").strip().rstrip(".,;!")
    return (answer, i, i + (cut.start() if cut else len(line))) if answer else None


def _negations(answer: str) -> tuple[str | None, bool]:
    """A phrase answer without what it denies: "not 5" is denied, (None, True); "not 5 but 6" is 6;
    "7, not 5" is 7. Returns (answer or None, whether a denial was found)."""
    lead = _LEADING_NEGATION.match(answer)
    if lead:
        but = _BUT.search(answer, lead.end())
        rest = answer[but.end() :].strip(" ,;:") if but else ""
        return (rest or None), True
    no_then = _NO_THEN.search(answer)
    if no_then and no_then.end() < len(answer):
        answer = answer[no_then.end() :].strip()
    if answer.rstrip().endswith("?") or _JUDGED.search(answer):  # "5?", "4 (incorrect)": not stated
        return None, True
    answer = _drop_remark(answer)
    neg = _NOT_WORD.search(answer)
    if neg and _has_value(answer[: neg.start()]) and _has_value(answer[neg.end() :]):
        head = answer[: neg.start()].rstrip(" ,;(")
        for joiner in (" and", " but"):
            if head.lower().endswith(joiner):
                head = head[: -len(joiner)].rstrip(" ,;(")
        return head, True
    return answer, False


def _drop_remark(answer: str) -> str:
    """`12 (the least common multiple)`: a trailing remark in words (no value, no "or", no unit) is
    no part of the answer; `2 (or possibly 3)` and `(1, 2)` are kept whole."""
    stripped = answer.rstrip()
    open_ = stripped.rfind("(")
    if not stripped.endswith(")") or open_ <= 0 or not _has_value(stripped[:open_]):
        return answer
    inside = stripped[open_ + 1 : -1]
    words = re.findall(r"[A-Za-z]+", inside)
    if not words or _has_value(inside) or "(" in inside:
        return answer
    if any(w.lower() in ("or", "and") or w.lower() in UNIT_TABLE for w in words):
        return answer
    return stripped[:open_].rstrip()


def _has_value(s: str) -> bool:
    return any(ch.isdigit() for ch in s) or "$" in s or "\\" in s


def _is_negation(clause: list[str], i: int) -> bool:
    word = clause[i].lower()
    before = clause[i - 1].lower() if i > 0 else ""
    negates = (
        word in _NEGATIONS
        or word.endswith(("n't", "n\u2019t"))
        or word == "out"
        and before in _RULE
        or (word == "way" and before == "no")
        or word in _JUDGEMENTS
        and i + 1 < len(clause)
    )  # "rule out 6", "no way"
    return negates and not (i + 1 < len(clause) and clause[i + 1].lower() in _NEG_IDIOMS)  # "not hard to see"


def _denied_before(text: str, start: int) -> bool:
    """Whether the candidate at `start` sits in a clause that negates it (a bounded look back)."""
    tokens = _NEG_TOKEN.findall(text[max(0, start - 100) : start])
    k = len(tokens)
    while k > 0 and tokens[k - 1].lower() not in _CLAUSE_BREAKS:
        k -= 1
    clause = tokens[k:]
    for i in range(len(clause)):
        if _is_negation(clause, i):
            # "a mistake is to answer 5": the judgement is the subject, the copula does not help
            return clause[i].lower() in _JUDGEMENTS or not any(
                clause[j].lower() in _COPULAS and clause[j - 1].lower() not in ("to", "not")
                for j in range(i + 1, len(clause))
            )
    return False


def _counterfactual(text: str, start: int, end: int) -> bool:
    """A candidate in a condition that the same sentence then denies: "If the answer were 3, the
    triangle would be degenerate, which is impossible", "It would be 9 if the die were fair, but
    it is not"."""
    before = _NEG_TOKEN.findall(text[max(0, start - 100) : start])
    k = len(before)
    while k > 0 and before[k - 1] not in ".;!?\n":
        k -= 1
    after = []
    for token in _NEG_TOKEN.findall(text[end : end + 200]):
        if token in ".;!?\n":
            break
        after.append(token.lower())
    words = [t.lower() for t in before[k:]] + after
    if words and words[0] in ("had", "were") and "would" in words:  # "Had we counted twice, we would get 12"
        return True
    if "would" in words[: len(words) - len(after)] and _CONDITIONS.intersection(words):
        return True  # "if we ignored the constraint we would only get 14"
    if not _CONDITIONS.intersection(words):
        return False
    return any(w in _NEGATIONS or w in _DENIALS_AFTER or w.endswith(("n't", "n\u2019t")) for w in after)


def _supposed(text: str, start: int) -> bool:
    """An answer phrase inside a supposition ("Suppose the answer is 5. Then ... a contradiction"):
    a step of a proof by contradiction, not a final answer."""
    tokens = _NEG_TOKEN.findall(text[max(0, start - 60) : start])
    k = len(tokens)
    while k > 0 and tokens[k - 1].lower() not in _CLAUSE_BREAKS:
        k -= 1
    return any(t.lower() in _SUPPOSITIONS for t in tokens[k:])


def _denied_after(text: str, end: int) -> bool:
    """Whether the candidate ending at `end` is followed by "is not", "fails", "isn't" ..."""
    words = [t.lower() for t in _NEG_TOKEN.findall(text[end : end + 40])[:2]]
    if not words:
        return False
    if words[0] in _FAILS or words[0] == "?":
        return True
    return len(words) == 2 and words[0] in _NEG_AFTER_VERBS and words[1] in _NEG_AFTER


def _alternative(text: str, start: int) -> str | None:
    """A second answer offered right after the first ("... or maybe 6", "it could also be $7$")."""
    m = _ALTERNATIVE.search(text, start, start + 200)
    if m is None:
        return None
    alt = m.group(1)
    return alt[1:-1] if alt.startswith("$") else alt


def _last_math_span(text: str) -> tuple[str, int, int] | None:
    """The last `$...$`/`\\(...\\)`/`\\[...\\]` span: its content, start and end index, found from the end."""
    best: tuple[str, int, int] | None = None
    for open_, close in (("\\(", "\\)"), ("\\[", "\\]")):
        stop = text.rfind(close)
        if stop > 0:
            start = text.rfind(open_, 0, stop)
            if start >= 0 and (best is None or stop > best[2]):
                best = (text[start + 2 : stop], start, stop + 2)
    plain = text.replace("\\$", "  ").replace("$$", "$ ")
    dollars = [i for i in (plain.rfind("$"),) if i >= 0]
    if dollars and plain.count("$") % 2 == 0:
        stop = dollars[0]
        start = plain.rfind("$", 0, stop)
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


def _numbers(text: str) -> list[re.Match]:
    return [m for m in _NUMBER.finditer(text) if not _glued(text, m)]


def _last_number(text: str) -> tuple[str | None, str | None, int]:
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
        if _denied_before(text, span[1]) or _denied_after(text, span[2]) or _counterfactual(text, span[1], span[2]):
            return None, span[0].strip(), span[2]
        hedge = _SPAN_HEDGE.search(text[max(0, span[2] - 300) : span[2]])
        if hedge:  # judged as a hedge later
            return f"{hedge.group(1).strip()} \\text{{ or }} {span[0].strip()}", None, span[2]
        return span[0].strip(), None, span[2]
    if last is None:
        return None, None, len(text)
    number, start, end = _widened(text, last)
    if _denied_before(text, start) or _denied_after(text, end) or _counterfactual(text, start, end):
        return None, number, end
    hedge = _HEDGE_TAIL.search(text[max(0, start - 120) : start])
    if hedge:  # "it is 5 or 6": both numbers are the answer, judged as a hedge later
        return f"{hedge.group(1)} \\text{{ or }} {number}", None, end
    return number, None, end


def _only_number(answer: str) -> str | None:
    """The one number in a phrase answer (the fallback if the phrase does not read as maths); none
    if it holds several or an "or": a hedge is never narrowed down to one of its values."""
    if len(answer) > 4000 or _OR_WORD.search(answer):
        return None
    found = {m.group(0) for m in _numbers(answer)}
    return found.pop() if len(found) == 1 else None


def extract(response: str, max_boxes: int = 16) -> Extraction:
    """The final answer(s) of `response`; an empty `answers` means no answer was found."""
    text = _STRUCK.sub(" ", _after_think(response))  # struck-out text (`~~5~~ 6`, `\\sout{5}`) is retracted
    tag = _answer_tag(text)
    found = _extract_from(text if tag is None else tag[0], tag is not None, max_boxes)
    if tag is not None and found.answers and not found.too_many:
        later = _after_answer(tag[1], boxed=False)  # "<answer>5</answer> Actually, scratch that: ... 7"
        if later is not None:
            return later
        # `<answer>1</answer> \\boxed{2}`: a box after the tags is a second final answer (boxes
        # before them are working that the tags supersede)
        outside, _, many = find_boxes(tag[1], max_boxes)
        merged = _distinct(list(found.answers) + outside)
        if len(merged) > len(found.answers):
            return Extraction(tuple(merged[: max_boxes + 1]), found.method, too_many=many or len(merged) > max_boxes)
    return found


def _extract_from(region: str, tagged: bool, max_boxes: int) -> Extraction:
    spans, unclosed, too_many = _box_spans(region, max_boxes)
    if spans or too_many:
        if too_many:
            return Extraction(tuple(_distinct(c for c, _, _ in spans)), "boxed", unclosed, too_many)
        spans = _after_retraction(region, spans)
        stated = _stated(region, spans)
        if not stated:  # "we can rule out \boxed{6}"
            return Extraction((), "boxed", denied=spans[-1][0])
        later = _after_answer(region[stated[-1][2] :], boxed=True)
        if later is not None:
            return later
        answers = _distinct(c for c, _, _ in stated)
        tail = _phrase_answer(region[stated[-1][2] :])
        if tail is not None and _has_value(tail[0]):  # "\boxed{100} ... The final answer is 50.": a second answer
            answers = _distinct(answers + [tail[0]])
        return Extraction(tuple(answers), "boxed", unclosed)
    if unclosed:
        return Extraction((), "boxed", unclosed=True)
    phrase = _phrase_answer(region)
    if phrase is not None and not phrase[0]:
        return Extraction((), "phrase", denied=region[max(0, phrase[1] - 60) : phrase[1]].strip())
    if phrase:
        later = _after_answer(region[phrase[2] :], boxed=False)
        if later is not None:
            return later
        answer, denied = _negations(phrase[0])
        if answer is None:
            return Extraction((), "phrase", denied=phrase[0])
        alternative = _alternative(region, phrase[2])  # judged like two boxes: a hedge unless equal
        answers = (answer,) if alternative is None else (answer, alternative)
        return Extraction(answers, "phrase", fallback=None if denied else _only_number(answer))
    if tagged and region.strip():
        return Extraction((region.strip(),), "answer_tag", fallback=_only_number(region))
    number, negated, end = _last_number(region)
    if number:
        later = _after_answer(region[end:], boxed=False, retract_only=True)
        if later is not None:
            return later
        return Extraction((number,), "last_number")
    return Extraction((), "none", denied=negated)


def _stated(text: str, spans: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """The boxes that the text does not deny; a content stands if one of its last three boxes is
    not denied (checking a few per distinct content bounds the work on thousands of boxes)."""
    denied: dict[str, int] = {}
    kept: set[str] = set()
    for content, start, end in reversed(spans):
        key = "".join(content.split())
        if key in kept or denied.get(key, 0) >= 3:
            continue
        if _denied_before(text, start) or _denied_after(text, end) or _counterfactual(text, start, end):
            denied[key] = denied.get(key, 0) + 1
        else:
            kept.add(key)
    return [sp for sp in spans if "".join(sp[0].split()) in kept]


def _after_answer(tail: str, boxed: bool, retract_only: bool = False) -> Extraction | None:
    """What the text after a final answer does to it: a retraction followed by a new answer ("no,
    the final value is 3") makes that the answer (after a box, only an answer phrase counts: a
    check of the work after a box is common); a retraction with nothing after it ("but that was
    wrong") leaves no answer; None when the answer stands."""
    if not retract_only:
        r = _RETRACT_PHRASE.search(tail)
        if r is not None:
            rest = tail[r.end() :]
            phrase = _phrase_answer(rest)
            if phrase is not None and _has_value(phrase[0]):
                answer, _ = _negations(phrase[0])
                return Extraction((answer,) if answer else (), "retracted", denied=None if answer else phrase[0])
            if not boxed:
                number, negated, _ = _last_number(rest)
                if number or negated:
                    return Extraction((number,) if number else (), "retracted", denied=negated)
    r = _RETRACTED.search(tail)
    if r is not None:
        return Extraction((), "retracted", denied=tail[r.start() : r.end()])
    return None


def extract_gold(gold: str) -> str:
    """The reference answer itself: the content of a `\\boxed{}` if it has one, without `$`s."""
    boxes, _, _ = find_boxes(gold, 1_000)
    if boxes:  # a worked reference solution: its boxed answer (several boxes: all of them)
        return boxes[0] if len(boxes) == 1 else ", ".join(boxes)
    text = gold.strip()
    span = _math_span_at(text, 0)
    if span is not None and span[1] >= len(text):
        return span[0].strip()
    return text
