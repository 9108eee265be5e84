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

The clause rules that decide where an answer stands denied (issue #27), kept from grammar 1 (they
also guard the lenient mode's last number):
- A candidate in a clause with "not", "n't", "never", "cannot", "impossible", "rule out", "no
  way", `\\ne`, or after a judgement ("a common mistake is to answer"), or followed by "is
  not"/"fails", is denied; a clause ends at punctuation and linking words (so, but, since, `=` ...);
  a copula after the negation keeps it ("the number of integers not divisible by 3 is 667"), and
  so do "not hard", "not less than". A phrase answer "7, not 5" is 7; "not 5 but 6" is 6; "8? No,
  9" is 9; a trailing remark in words is dropped ("12 (the least common multiple)" is 12).
- A counterfactual the sentence denies ("if the answer were 3, ... which is impossible"), an answer
  phrase inside a supposition ("Suppose the answer is 5. Then ... a contradiction"), another's claim
  judged wrong ("the textbook says 15, which is a typo") and an answer judged in place ("4
  (incorrect, see below)") are denials.
- A number glued to letters is part of a word (`AZYUK2A`, `x2`, `5x`); units and ordinals after it
  (`5cm`, `3rd`) are allowed; `pi/2`, `√3`, `2π`, `3 sqrt(2)` are taken whole.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

from rlvr.verifiers.math.text import is_digit, plain
from rlvr.verifiers.math.units import TABLE as UNIT_TABLE
from rlvr.verifiers.math.words import DOUBT_RE, HEDGE_RE, RETRACTION_RE

_MARKS_AGAINST = "?\u2717\u2718\u274c\u2716"  # ? ✗ ✘ ❌ ✖ right after an answer: asked or marked wrong
_MAX_HEDGED = 4
_TAIL_WINDOW = 600  # how far after the final answer a doubt, retraction or hedge is looked for
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n")
_SPAN_OR_NUMBER = re.compile(r"\$[^$\n]{1,80}\$|\\frac\{[^{}]{1,20}\}\{[^{}]{1,20}\}|-?\d+(?:\.\d+)?(?:/\d+)?")
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
        if _RETRACT.search(text, spans[k - 1][2], spans[k][1]) or RETRACTION_RE.search(
            text, spans[k - 1][2], spans[k][1]
        ):
            return spans[k:]
    return spans


_FENCE = re.compile(r"```[A-Za-z0-9_+-]{0,20}[ \t]*\n?([^`]{0,4000}?)```")
_MARKER_BEFORE = re.compile(r"answer\W{0,12}(?:is\W{0,6})?$", re.IGNORECASE)


def _fenced(text: str) -> str:
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


def _configured(text: str, patterns: tuple[str, ...]) -> Extraction | None:
    """The last match of a configured marker (`MathOptions.answer_patterns`), its group 1 the answer."""
    last: tuple[int, str] | None = None
    for pattern in patterns:
        for m in re.finditer(pattern, text):
            if m.group(1) and (last is None or m.start() >= last[0]):
                last = (m.start(), m.group(1).strip())
    return None if last is None or not last[1] else Extraction((last[1],), "pattern")


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
    return any(is_digit(ch) for ch in s) or "$" in s or "\\" in s


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


def extract(
    response: str, max_boxes: int = 16, require_marker: bool = True, patterns: tuple[str, ...] = ()
) -> Extraction:
    """The final answer(s) of `response`; an empty `answers` means no answer was found."""
    text = _STRUCK.sub(" ", _after_think(plain(response)))  # struck-out text (`~~5~~ 6`, `\\sout{5}`) is retracted
    text = _fenced(text)
    tag = _answer_tag(text)
    found = _extract_from(text if tag is None else tag[0], tag is not None, max_boxes, require_marker)
    if not found.answers and found.denied is None and patterns:
        found = _configured(text, patterns) or found
    if tag is not None and found.answers and not found.too_many:
        # "<answer>5</answer> Actually, no, the answer is 7"
        later = _after_answer(tag[1], boxed=False, require_marker=require_marker)
        if later is not None:
            return later
        # `<answer>1</answer> \\boxed{2}`: a box after the tags is a second final answer (boxes
        # before them are working that the tags supersede)
        outside, _, many = find_boxes(tag[1], max_boxes)
        merged = _distinct(list(found.answers) + outside)
        if len(merged) > len(found.answers):
            return Extraction(tuple(merged[: max_boxes + 1]), found.method, too_many=many or len(merged) > max_boxes)
    return found


def _extract_from(region: str, tagged: bool, max_boxes: int, require_marker: bool = True) -> Extraction:
    spans, unclosed, too_many = _box_spans(region, max_boxes)
    if spans or too_many:
        if too_many:
            return Extraction(tuple(_distinct(c for c, _, _ in spans)), "boxed", unclosed, too_many)
        spans = _after_retraction(region, spans)
        stated = _stated(region, spans)
        if not stated:  # "we can rule out \boxed{6}": no box stands; a marked answer after them may
            phrase = _phrase_answer(region[spans[-1][2] :])
            if phrase is not None and _has_value(phrase[0]):
                return _from_phrase(region[spans[-1][2] :], phrase, require_marker)
            return Extraction((), "boxed", denied=spans[-1][0])
        tail = region[stated[-1][2] :]
        later = _after_answer(tail, boxed=True)
        if later is not None:
            return later
        phrase = _phrase_answer(tail)
        if phrase is not None and _has_value(phrase[0]):  # "\boxed{6} ... The final answer is 5.": 5 supersedes
            return _from_phrase(tail, phrase, require_marker)
        answers = _distinct(c for c, _, _ in stated)
        taken_back = _taken_back(tail)
        if taken_back is not None:
            return Extraction((), "boxed", denied=taken_back)
        answers = _distinct(answers + _hedged(tail))  # "\boxed{3}, though 5 is also possible": a hedge
        return Extraction(tuple(answers), "boxed", unclosed)
    if unclosed:
        return Extraction((), "boxed", unclosed=True)
    phrase = _phrase_answer(region)
    if phrase is not None and not phrase[0]:
        return Extraction((), "phrase", denied=region[max(0, phrase[1] - 60) : phrase[1]].strip())
    if phrase:
        return _from_phrase(region, phrase, require_marker)
    if tagged and region.strip():
        return Extraction((region.strip(),), "answer_tag", fallback=None if require_marker else _only_number(region))
    if require_marker:  # no box, tags or answer phrase: no answer (a last number is no commitment)
        return Extraction((), "none")
    number, negated, end = _last_number(region)
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
    answer, denied = _negations(phrase[0])
    if answer is None:
        return Extraction((), "phrase", denied=phrase[0])
    taken_back = _taken_back(tail)
    if taken_back is not None:
        return Extraction((), "phrase", denied=taken_back)
    alternative = _alternative(region, phrase[2])  # judged like two boxes: a hedge unless equal
    answers = tuple(_distinct([answer] + ([alternative] if alternative else []) + _hedged(tail)))
    fallback = None if denied or require_marker else _only_number(answer)
    return Extraction(answers, "phrase", fallback=fallback)


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
        if _denied_before(text, start) or _denied_after(text, end) or _counterfactual(text, start, end):
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
        r = _RETRACT_PHRASE.search(tail)
        if r is not None:
            rest = tail[r.end() :]
            phrase = _phrase_answer(rest)
            if phrase is not None and _has_value(phrase[0]):
                answer, _ = _negations(phrase[0])
                return Extraction((answer,) if answer else (), "retracted", denied=None if answer else phrase[0])
            if not boxed:
                number, negated, _ = _last_number(rest)
                if number and require_marker:  # the retracted answer is gone; the new one is unmarked
                    return Extraction((), "retracted", denied=tail[r.start() : r.end()])
                if number or negated:
                    return Extraction((number,) if number else (), "retracted", denied=negated)
    r = _RETRACTED.search(tail)
    if r is not None:
        return Extraction((), "retracted", denied=tail[r.start() : r.end()])
    return None


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
