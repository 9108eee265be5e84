"""The extraction proper: where a response marks an answer, and the raw text that stands there.

Boxes (`\\boxed{R}`, `\\fbox{R}`, `\\boxed R`), `<answer>` tags, answer phrases ("the answer is R",
"Answer: R", a "Final Answer" heading), math spans (`$...$`, `\\(...\\)`, `\\[...\\]`), code fences
and configured patterns are found here; which of the candidates is the final answer is decided by
the final-answer grammar (`final_answer`). `extract_gold` reads a reference answer.

Time: every scan is linear in the text. Trigger words are found by a literal pattern and what
follows them by single-class runs (the old answer-phrase pattern, `\\s*\\**\\s*:?\\s*`, took 246 s
on "Final answer" and 1,000 spaces); braces are matched by a scan in C between them.
"""

from __future__ import annotations

import re

from rlvr.verifiers.math.denials import counterfactual, denied_before, supposed
from rlvr.verifiers.math.text import plain

_BOX = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
_BRACE = re.compile(r"[{}\\]")
# The words that open an answer phrase; what must follow them ("is", ":", a heading's newline)
# is checked by a plain scan (`_phrase_end`), never by nested whitespace quantifiers.
_TRIGGER = re.compile(r"answers?|option|choice", re.IGNORECASE)
_SKIP_BLANK = re.compile(r"[\s*]*")  # one run of whitespace and bold marks: a single quantifier
_SKIP_HEADING = re.compile(r"[\s*:]*")
_SENTENCE_END = re.compile(r"\.(?:\s|$)|\s(?:because|since|which|where|so that|as)\s|;|\bI hope\b", re.IGNORECASE)
_JOINED_SPAN = re.compile(r"\s*(?:,\s*)?(?:(?:or|and)\s*)?(?=\$|\\\()", re.IGNORECASE)
_FENCE = re.compile(r"```[A-Za-z0-9_+-]{0,20}[ \t]*\n?([^`]{0,4000}?)```")
_MARKER_BEFORE = re.compile(r"answer\W{0,12}(?:is\W{0,6})?$", re.IGNORECASE)


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


def box_spans(text: str, max_distinct: int) -> tuple[list[tuple[str, int, int]], bool, bool]:
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


def distinct(contents) -> list[str]:
    """The contents in order, each once (whitespace does not tell two apart)."""
    out, seen = [], set()
    for c in contents:
        key = "".join(c.split())
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def find_boxes(text: str, max_distinct: int) -> tuple[list[str], bool, bool]:
    """All distinct top-level `\\boxed{...}`/`\\fbox{...}` contents: (contents, unclosed, too_many)."""
    spans, unclosed, too_many = box_spans(text, max_distinct)
    return distinct(c for c, _, _ in spans), unclosed, too_many


def fenced(text: str) -> str:
    """Code fences: a fenced block right after an answer marker ("Answer:\\n```\\n42\\n```") is that
    answer, its fences dropped; any other block is code, blanked out, so that nothing in it (an
    `answer = 6 * 7`, a printed 42) is taken for a marked answer."""
    if "```" not in text:
        return text

    def block(m: re.Match) -> str:
        if _MARKER_BEFORE.search(text, max(0, m.start() - 40), m.start()):
            return m.group(1)
        return " " * (m.end() - m.start())

    return _FENCE.sub(block, text)


def configured(text: str, patterns: tuple[str, ...]) -> str | None:
    """The answer at the last match of a configured marker (`MathOptions.answer_patterns`): its group 1."""
    last: tuple[int, str] | None = None
    for pattern in patterns:
        for m in re.finditer(pattern, text):
            if m.group(1) and (last is None or m.start() >= last[0]):
                last = (m.start(), m.group(1).strip())
    return None if last is None or not last[1] else last[1]


def after_think(text: str) -> str:
    """The text after `</think>` when some follows it (the thinking before is working)."""
    cut = text.rfind("</think>")
    if cut >= 0 and text[cut + 8 :].strip():
        return text[cut + 8 :]
    return text


def answer_tag(text: str) -> tuple[str, str] | None:
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


def phrase_answer(text: str) -> tuple[str, int, int] | None:
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
    if denied_before(text, trigger) or counterfactual(text, trigger, last) or supposed(text, trigger):
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


def extract_gold(gold: str) -> str:
    """The reference answer itself: the content of a `\\boxed{}` if it has one, without `$`s."""
    gold = plain(gold)
    boxes, _, _ = find_boxes(gold, 1_000)
    if boxes:  # a worked reference solution: its boxed answer (several boxes: all of them)
        return boxes[0] if len(boxes) == 1 else ", ".join(boxes)
    text = gold.strip()
    span = _math_span_at(text, 0)
    if span is not None and span[1] >= len(text):
        return span[0].strip()
    return text
