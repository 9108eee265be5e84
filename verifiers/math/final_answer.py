"""The final-answer grammar: what a final answer is, what may stand in its region, and what
supersedes what. `verify` grades exactly what `extract` returns (grammar 2.0, issue 38).

0. Text. The response is made plain first (`text.plain`: one way to write each digit, minus and
   fraction; invisible characters gone). `<think>...</think>` is working when text follows it;
   struck-out text (`~~5~~`, `\\sout{5}`) is withdrawn; a code fence is code, nothing in it an
   answer, unless it stands right after an answer marker ("Answer:" and a fenced 42).

1. Markers. An answer exists only where the text marks it:
   - a box, `\\boxed{R}` or `\\fbox{R}`;
   - answer tags, `<answer>R</answer>`;
   - an answer phrase: "answer is R", "answer: R", "answer = R", or a "Final Answer" heading with R
     on the next line ("Final Answer: The final answer is $R$." is one). R is one math span
     (`$...$`, `\\(...\\)`, `\\[...\\]`; spans joined by "or"/"and"/commas are one region), or
     the words up to the end of the sentence;
   - a configured pattern (`MathOptions.answer_patterns`; its group 1 is R).
   Without a marker there is no answer (`format_error`): a last number is no commitment, whatever
   it equals ("took me 5 minutes", "Python 3.11", a number restated from the question).
   `MathOptions(require_marker=False)` is the lenient mode for grading other people's formats: the
   last number or math span stands in for the marker, and the verdict's detail says "lenient".

2. The final answer is the last committed one.
   - Boxes: the boxes after the last retraction written between two of them ("wait, that is
     wrong", `words.RETRACTIONS`) are the answer; several different ones are a hedge (wrong).
   - A marked answer after the boxes supersedes them ("\\boxed{6} ... The final answer is 5": 5).
   - An answer is not committed when the text denies it where it stands ("the answer is not 5",
     "we can rule out \\boxed{6}": the clause rules below), asks it ("Answer: 7?"), marks it wrong
     right after it (`✗`), or takes it back after it: a retraction or a doubt (`words.RETRACTIONS`,
     `words.DOUBTS`: "I am not 100% sure") leaves no answer unless a new marked answer follows
     ("Wait, no, the answer is 3"); a weaker word ("wait", "actually", "no,") followed by an
     unmarked value ("wait, no: 3") leaves none either (the lenient mode takes that value).
   - A hedge offers other values beside it: every sentence after the answer that holds a hedge
     (`words.HEDGES`: "though 5 is also possible", "it would be 13 instead") adds its values as
     further answers, judged together with it: wrong unless they all equal it ("12 could also be
     written as $2^2 \\cdot 3$" is still 12). "2 or 3" inside a region is two answers as well.

3. The region. R must parse completely (`parse.parse_answer` and `grammar.Parser` with
   `strict=True`): maths, plus words from the closed classes of `words` only: units (with
   square/cubic/per, degree, radian and gon words), multipliers applied to the number before them
   (`5 thousand` is 5000, `2 dozen` is 24), fillers ("the answer is" inside a box), approximation
   words (never right for an exact gold), spelled-out numbers ("twenty-five"), phrases with a fixed
   meaning ("no solution", "does not exist", "all real numbers") and a counted noun after a number
   ("12 apples": at most two words, none of them one that changes, compares, denies, hedges or
   judges a value, `words.OPERATIVE`). Any other word makes R no answer: `\\boxed{5 \\text{ is the
   wrong answer}}`, `\\text{half of } 10` and `5 \\text{ factorial}` are neither 5 nor 10.

Time: every scan here is linear in the response length. No regex has nested or adjacent
overlapping quantifiers over unbounded text (the old answer-phrase pattern, `\\s*\\**\\s*:?\\s*`,
took 246 s on "Final answer" and 1,000 spaces): trigger words are found by a literal pattern and
what follows them by single-class runs; look-backs and look-aheads use windows of at most a few
hundred characters; of thousands of numbers or boxes only the last few are examined in Python.

Where an answer stands denied is decided by the clause rules of issue #27 (`denials`: "the answer
is not 5", "7, not 5" is 7, counterfactuals, suppositions, claims judged wrong); the unmarked value
the lenient mode reads is `last_number`'s. The markers and what stands at them are read by `markers`
(the extraction proper); the words the grammar acts on are the classes of `words`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rlvr.verifiers.math.denials import counterfactual, denied_after, denied_before, negations
from rlvr.verifiers.math.last_number import last_number, only_number
from rlvr.verifiers.math.markers import (
    after_think,
    answer_tag,
    box_spans,
    configured,
    distinct,
    fenced,
    find_boxes,
    phrase_answer,
)
from rlvr.verifiers.math.text import has_value, plain
from rlvr.verifiers.math.words import (
    CORRECTION_RE,
    DOUBT_RE,
    HEDGE_RE,
    RETRACTION_RE,
    TAKEN_BACK_RE,
    WEAK_RETRACTION_RE,
)

_MARKS_AGAINST = "?\u2717\u2718\u274c\u2716"  # ? ✗ ✘ ❌ ✖ right after an answer: asked or marked wrong
_MAX_HEDGED = 4
_TAIL_WINDOW = 600  # how far after the final answer a doubt, retraction or hedge is looked for
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n")
_SPAN_OR_NUMBER = re.compile(r"\$[^$\n]{1,80}\$|\\frac\{[^{}]{1,20}\}\{[^{}]{1,20}\}|-?\d+(?:\.\d+)?(?:/\d+)?")
_STRUCK = re.compile(r"~~[^~\n]{1,200}~~|\\(?:sout|st|cancel|xcancel|bcancel)\{[^{}]{0,200}\}")
_ALTERNATIVE = re.compile(
    r"(?:\bor\s+(?:maybe\s+|perhaps\s+|possibly\s+)?|could\s+also\s+be\s+|might\s+(?:also\s+)?be\s+|alternatively,?\s+)"
    r"(\$[^$\n]{1,80}\$|-?\d+(?:\.\d+)?(?:/\d+)?)(?![\w^])",
    re.IGNORECASE,
)


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


def extract(
    response: str, max_boxes: int = 16, require_marker: bool = True, patterns: tuple[str, ...] = ()
) -> Extraction:
    """The final answer(s) of `response`; an empty `answers` means no answer was found."""
    text = _STRUCK.sub(" ", after_think(plain(response)))  # struck-out text (`~~5~~ 6`, `\\sout{5}`) is retracted
    text = fenced(text)
    tag = answer_tag(text)
    found = _extract_from(text if tag is None else tag[0], tag is not None, max_boxes, require_marker)
    if not found.answers and found.denied is None and patterns:
        pattern = configured(text, patterns)
        found = found if pattern is None else Extraction((pattern,), "pattern")
    if tag is not None and found.answers and not found.too_many:
        # "<answer>5</answer> Actually, no, the answer is 7"
        later = _after_answer(tag[1], boxed=False, require_marker=require_marker)
        if later is not None:
            return later
        # `<answer>1</answer> \\boxed{2}`: a box after the tags is a second final answer (boxes
        # before them are working that the tags supersede)
        outside, _, many = find_boxes(tag[1], max_boxes)
        merged = distinct(list(found.answers) + outside)
        if len(merged) > len(found.answers):
            return Extraction(tuple(merged[: max_boxes + 1]), found.method, too_many=many or len(merged) > max_boxes)
    return found


def _extract_from(region: str, tagged: bool, max_boxes: int, require_marker: bool = True) -> Extraction:
    spans, unclosed, too_many = box_spans(region, max_boxes)
    if spans or too_many:
        if too_many:
            return Extraction(tuple(distinct(c for c, _, _ in spans)), "boxed", unclosed, too_many)
        spans = _after_retraction(region, spans)
        stated = _stated(region, spans)
        if not stated:  # "we can rule out \boxed{6}": no box stands; a marked answer after them may
            phrase = phrase_answer(region[spans[-1][2] :])
            if phrase is not None and has_value(phrase[0]):
                return _from_phrase(region[spans[-1][2] :], phrase, require_marker)
            return Extraction((), "boxed", denied=spans[-1][0])
        tail = region[stated[-1][2] :]
        later = _after_answer(tail, boxed=True)
        if later is not None:
            return later
        phrase = phrase_answer(tail)
        if phrase is not None and has_value(phrase[0]):  # "\boxed{6} ... The final answer is 5.": 5 supersedes
            return _from_phrase(tail, phrase, require_marker)
        answers = distinct(c for c, _, _ in stated)
        taken_back = _taken_back(tail)
        if taken_back is not None:
            return Extraction((), "boxed", denied=taken_back)
        answers = distinct(answers + _hedged(tail))  # "\boxed{3}, though 5 is also possible": a hedge
        return Extraction(tuple(answers), "boxed", unclosed)
    if unclosed:
        return Extraction((), "boxed", unclosed=True)
    phrase = phrase_answer(region)
    if phrase is not None and not phrase[0]:
        return Extraction((), "phrase", denied=region[max(0, phrase[1] - 60) : phrase[1]].strip())
    if phrase:
        return _from_phrase(region, phrase, require_marker)
    if tagged and region.strip():
        return Extraction((region.strip(),), "answer_tag", fallback=None if require_marker else only_number(region))
    if require_marker:  # no box, tags or answer phrase: no answer (a last number is no commitment)
        return Extraction((), "none")
    number, negated, end = last_number(region)
    if number:
        later = _after_answer(region[end:], boxed=False, retract_only=True)
        if later is not None:
            return later
        return Extraction((number,), "last_number")
    return Extraction((), "none", denied=negated)


def _from_phrase(region: str, phrase: tuple[str, int, int], require_marker: bool) -> Extraction:
    """The answer of the phrase `phrase` found in `region`, with what the text after it does to it."""
    tail = region[phrase[2] :]
    later = _after_answer(tail, boxed=False, require_marker=require_marker)
    if later is not None:
        return later
    answer, denied = negations(phrase[0])
    if answer is None:
        return Extraction((), "phrase", denied=phrase[0])
    taken_back = _taken_back(tail)
    if taken_back is not None:
        return Extraction((), "phrase", denied=taken_back)
    alternative = _alternative(region, phrase[2])  # judged like two boxes: a hedge unless equal
    answers = tuple(distinct([answer] + ([alternative] if alternative else []) + _hedged(tail)))
    fallback = None if denied or require_marker else only_number(answer)
    return Extraction(answers, "phrase", fallback=fallback)


def _alternative(text: str, start: int) -> str | None:
    """A second answer offered right after the first ("... or maybe 6", "it could also be $7$")."""
    m = _ALTERNATIVE.search(text, start, start + 200)
    if m is None:
        return None
    alt = m.group(1)
    return alt[1:-1] if alt.startswith("$") else alt


def _after_retraction(text: str, spans: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """The boxes after the last retraction written between two boxes (`\\boxed{3}`. Wait, that is
    wrong ... `\\boxed{4}`): a self-correction, so only the later boxes are the answer. A policy
    gains nothing by writing one: it is judged on the last box(es) alone."""
    for k in range(len(spans) - 1, 0, -1):
        if CORRECTION_RE.search(text, spans[k - 1][2], spans[k][1]) or RETRACTION_RE.search(
            text, spans[k - 1][2], spans[k][1]
        ):
            return spans[k:]
    return spans


def _taken_back(tail: str) -> str | None:
    """What in the text after the final answer takes it back, or None when it stands: a mark right
    after it (`?`, `✗`), a doubt (`words.DOUBTS`: "I am not 100% sure") or a retraction
    (`words.RETRACTIONS`: "I don't think that's right")."""
    head = tail.lstrip(" \t$)}]*")
    if head and head[0] in _MARKS_AGAINST:
        return head[0]
    window = tail[:_TAIL_WINDOW]
    for pattern in (DOUBT_RE, RETRACTION_RE):
        m = pattern.search(window)
        if m is not None:
            return m.group(0)
    return None


def _hedged(tail: str) -> list[str]:
    """The values that the text after the final answer offers beside it: those of each sentence with
    a hedge (`words.HEDGES`: "though 5 is also possible", "it would be 13 instead"). They are judged
    with the answer as several answers: a hedge, unless they are all equal to it ("12 could also be
    written as $2^2 \\cdot 3$")."""
    values: list[str] = []
    for sentence in _SENTENCE.split(tail[:_TAIL_WINDOW]):
        if HEDGE_RE.search(sentence):
            values += [v.strip("$") for v in _SPAN_OR_NUMBER.findall(sentence)]
    return values[:_MAX_HEDGED]


def _stated(text: str, spans: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """The boxes that the text does not deny; a content stands if one of its last three boxes is
    not denied (checking a few per distinct content bounds the work on thousands of boxes)."""
    denied: dict[str, int] = {}
    kept: set[str] = set()
    for content, start, end in reversed(spans):
        key = "".join(content.split())
        if key in kept or denied.get(key, 0) >= 3:
            continue
        if denied_before(text, start) or denied_after(text, end) or counterfactual(text, start, end):
            denied[key] = denied.get(key, 0) + 1
        else:
            kept.add(key)
    return [sp for sp in spans if "".join(sp[0].split()) in kept]


def _after_answer(tail: str, boxed: bool, retract_only: bool = False, require_marker: bool = True) -> Extraction | None:
    """What the text after a final answer does to it: a retraction followed by a new marked answer
    ("no, the final answer is 3") makes that the answer; followed by an unmarked value ("wait, no:
    3") it leaves none (the value is the answer only with `require_marker=False`, and never after
    a box: a check of the work after a box is common); a retraction with nothing after it ("but
    that was wrong") leaves no answer; None when the answer stands."""
    if not retract_only:
        r = WEAK_RETRACTION_RE.search(tail)
        if r is not None:
            rest = tail[r.end() :]
            phrase = phrase_answer(rest)
            if phrase is not None and has_value(phrase[0]):
                answer, _ = negations(phrase[0])
                return Extraction((answer,) if answer else (), "retracted", denied=None if answer else phrase[0])
            if not boxed:
                number, negated, _ = last_number(rest)
                if number and require_marker:  # the retracted answer is gone; the new one is unmarked
                    return Extraction((), "retracted", denied=tail[r.start() : r.end()])
                if number or negated:
                    return Extraction((number,) if number else (), "retracted", denied=negated)
    r = TAKEN_BACK_RE.search(tail)
    if r is not None:
        return Extraction((), "retracted", denied=tail[r.start() : r.end()])
    return None
