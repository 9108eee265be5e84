"""Finding the final answer in a model's response.

In order: the `<answer>` tags (the last pair) narrow the text; then every `\\boxed{}`/`\\fbox{}`
in it (a box inside a box is one box; several different ones are a hedge, judged later, unless
a retraction such as "wait, that is wrong" comes between them: then only the later ones count);
else the last "the answer is ..." / "Answer:" phrase; else the tag contents; else the last
number (or the last `$...$` span that holds it). A box after the `<answer>` tags is a second
final answer. Text inside `<think>...</think>` is skipped when an answer follows it.
Every scan here is linear in the response length: no regex that can backtrack badly.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_BOX = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
_PHRASE = re.compile(
    r"(?:answers?|correct (?:option|choice)|option|choice)(?:\s*\*\*)?\s*(?:is\b\s*:?|are\b\s*:?|:|=)|final\s+answer\s*\**\s*:?\s*\**[ \t]*\n", re.IGNORECASE
)
_SENTENCE_END = re.compile(r"\.(?:\s|$)|\s(?:because|since|which|where|so that|as)\s|;|\bI hope\b", re.IGNORECASE)
_NUMBER = re.compile(  # also "7 425 000" (thousands grouped by spaces) and ".4" (no leading zero)
    r"-?\\[dt]?frac\{-?\d+\}\{\d+\}"
    r"|-?(?:[1-9]\d{0,2}(?: \d{3})+(?![\d/])|\d+(?:,\d{3})*|(?<![\w.])(?=\.\d))(?:\.\d+)?(?:[eE][-+]?\d+)?(?:/\d+)?(?:\\?%)?"
)
# Words that retract an earlier boxed answer (a self-correction), searched between two boxes.
_RETRACT = re.compile(
    r"\b(?:wait|actually|oops|mistakes?|mistaken|errors?|wrong|incorrect|correct(?:ion|ing|ed)|re-?check\w*|"
    r"recalculat\w*|recomput\w*|re-?do|re-?evaluat\w*|reconsider\w*|revis\w*|scratch that|no,|second thought|"
    r"miscount\w*|miscalculat\w*|not (?:right|correct)|instead|should (?:be|have))",
    re.IGNORECASE,
)
_JOINED_SPAN = re.compile(r"\s*(?:,\s*)?(?:(?:or|and)\s*)?(?=\$|\\\()", re.IGNORECASE)
_ALTERNATIVE = re.compile(
    r"(?:\bor\s+(?:maybe\s+|perhaps\s+|possibly\s+)?|could\s+also\s+be\s+|might\s+(?:also\s+)?be\s+|alternatively,?\s+)"
    r"(\$[^$\n]{1,80}\$|-?\d+(?:\.\d+)?(?:/\d+)?)(?![\w^])",
    re.IGNORECASE,
)
_HEDGE_TAIL = re.compile(
    r"(-?\\[dt]?frac\{-?\d+\}\{\d+\}|-?\d+(?:\.\d+)?(?:/\d+)?)\s*(?:,\s*)?or\s+(?:maybe\s+|perhaps\s+|possibly\s+)?$", re.IGNORECASE
)
_SPAN_HEDGE = re.compile(  # "either $3$ or $4$" at the end: both spans are the answer
    r"\$([^$\n]{1,80})\$\s*(?:,\s*)?or\s+(?:maybe\s+|perhaps\s+|possibly\s+)?\$[^$\n]{1,80}\$$", re.IGNORECASE
)


@dataclass(frozen=True)
class Extraction:
    """The candidate final answers found in a response (raw strings, not yet parsed).

    `answers` holds several strings only for several boxes; `method` says where they came from;
    `unclosed` marks a `\\boxed{` that never closes (a truncated answer); `too_many` marks more
    distinct boxes than the options allow (a hedge by definition); `fallback` is the last number,
    for a phrase ("the answer is ...") that does not read as maths."""

    answers: tuple[str, ...]
    method: str
    unclosed: bool = False
    too_many: bool = False
    fallback: str | None = None  # the last number, used if a phrase answer turns out unreadable


def _match_braces(text: str, start: int) -> int:
    """Index just past the `}` closing the `{` at `start`, or -1 if it never closes."""
    depth = 0
    i, n = start, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
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
            if stop > start + len(open_):
                return text[start + len(open_) : stop], stop + len(close)
    return None


def _phrase_answer(text: str) -> tuple[str, int] | None:
    """The answer after the last "the answer is"/"Answer:" and the index where it ends."""
    last = None
    for last in _PHRASE.finditer(text):
        pass
    if last is None:
        return None
    i = last.end()
    while i < len(text) and text[i] in " \t\n*:":
        i += 1
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
        return " \\text{ or } ".join(parts), span[1]
    line = text[i : i + 4000].split("\n", 1)[0]
    cut = _SENTENCE_END.search(line)
    answer = (line[: cut.start()] if cut else line).strip().strip("*").strip().rstrip(".,;!")
    return (answer, i + (cut.start() if cut else len(line))) if answer else None


def _alternative(text: str, start: int) -> str | None:
    """A second answer offered right after the first ("... or maybe 6", "it could also be $7$")."""
    m = _ALTERNATIVE.search(text, start, start + 200)
    if m is None:
        return None
    alt = m.group(1)
    return alt[1:-1] if alt.startswith("$") else alt


def _last_math_span(text: str) -> tuple[str, int] | None:
    """The last `$...$`/`\\(...\\)`/`\\[...\\]` span and its end index, found from the end."""
    best: tuple[str, int] | None = None
    for open_, close in (("\\(", "\\)"), ("\\[", "\\]")):
        stop = text.rfind(close)
        if stop > 0:
            start = text.rfind(open_, 0, stop)
            if start >= 0 and (best is None or stop > best[1]):
                best = (text[start + 2 : stop], stop + 2)
    plain = text.replace("\\$", "  ").replace("$$", "$ ")
    dollars = [i for i in (plain.rfind("$"),) if i >= 0]
    if dollars and plain.count("$") % 2 == 0:
        stop = dollars[0]
        start = plain.rfind("$", 0, stop)
        if start >= 0 and (best is None or stop > best[1]):
            best = (text[start + 1 : stop], stop + 1)
    return best


def _last_number(text: str) -> str | None:
    last = None
    for last in _NUMBER.finditer(text):
        pass
    span = _last_math_span(text)
    if span is not None and span[0].strip() and (last is None or span[1] >= last.end()):
        hedge = _SPAN_HEDGE.search(text[max(0, span[1] - 200) : span[1]])
        if hedge:  # judged as a hedge later
            return f"{hedge.group(1).strip()} \\text{{ or }} {span[0].strip()}"
        return span[0].strip()
    if last is None:
        return None
    hedge = _HEDGE_TAIL.search(text[max(0, last.start() - 40) : last.start()])
    if hedge:  # "it is 5 or 6": both numbers are the answer, judged as a hedge later
        return f"{hedge.group(1)} \\text{{ or }} {last.group(0)}"
    return last.group(0)


def extract(response: str, max_boxes: int = 16) -> Extraction:
    """The final answer(s) of `response`; an empty `answers` means no answer was found."""
    text = _after_think(response)
    tag = _answer_tag(text)
    found = _extract_from(text if tag is None else tag[0], tag is not None, max_boxes)
    if tag is not None and found.answers and not found.too_many:
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
        if not too_many:
            spans = _after_retraction(region, spans)
        return Extraction(tuple(_distinct(c for c, _, _ in spans)), "boxed", unclosed, too_many)
    if unclosed:
        return Extraction((), "boxed", unclosed=True)
    phrase = _phrase_answer(region)
    number = _last_number(region)
    if phrase:
        alternative = _alternative(region, phrase[1])  # judged like two boxes: a hedge unless equal
        answers = (phrase[0],) if alternative is None else (phrase[0], alternative)
        return Extraction(answers, "phrase", fallback=number)
    if tagged and region.strip():
        return Extraction((region.strip(),), "answer_tag", fallback=number)
    if number:
        return Extraction((number,), "last_number")
    return Extraction((), "none")


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
