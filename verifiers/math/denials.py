"""Where an answer stands denied: the clause rules of the final-answer grammar (issue #27; `final_answer`
finds the answers, these say which of them the text takes away where they stand).

- A candidate in a clause with "not", "n't", "never", "cannot", "impossible", "rule out", "no
  way", `\\ne`, or after a judgement ("a common mistake is to answer"), or followed by "is
  not"/"fails", is denied; a clause ends at punctuation and linking words (so, but, since, `=` ...);
  a copula after the negation keeps it ("the number of integers not divisible by 3 is 667"), and
  so do "not hard", "not less than".
- A phrase answer loses what it denies (`negations`): "7, not 5" is 7; "not 5 but 6" is 6; "8? No,
  9" is 9; "5?" and "4 (incorrect)" are not stated; a trailing remark in words is dropped ("12 (the
  least common multiple)" is 12).
- A counterfactual the sentence denies ("if the answer were 3, ... which is impossible", "had we
  counted twice, we would get 12"), an answer phrase inside a supposition ("Suppose the answer is
  5. Then ... a contradiction") and another's claim judged wrong ("the textbook says 15, which is a
  typo") are denials.
Every rule reads a window of at most a few hundred characters around the candidate, so its cost per
candidate is bounded.
"""

from __future__ import annotations

import re

from rlvr.verifiers.math.text import has_value
from rlvr.verifiers.math.units import TABLE as UNIT_TABLE

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


def negations(answer: str) -> tuple[str | None, bool]:
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
    if neg and has_value(answer[: neg.start()]) and has_value(answer[neg.end() :]):
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
    if not stripped.endswith(")") or open_ <= 0 or not has_value(stripped[:open_]):
        return answer
    inside = stripped[open_ + 1 : -1]
    words = re.findall(r"[A-Za-z]+", inside)
    if not words or has_value(inside) or "(" in inside:
        return answer
    if any(w.lower() in ("or", "and") or w.lower() in UNIT_TABLE for w in words):
        return answer
    return stripped[:open_].rstrip()


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


def denied_before(text: str, start: int) -> bool:
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


def counterfactual(text: str, start: int, end: int) -> bool:
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


def supposed(text: str, start: int) -> bool:
    """An answer phrase inside a supposition ("Suppose the answer is 5. Then ... a contradiction"):
    a step of a proof by contradiction, not a final answer."""
    tokens = _NEG_TOKEN.findall(text[max(0, start - 60) : start])
    k = len(tokens)
    while k > 0 and tokens[k - 1].lower() not in _CLAUSE_BREAKS:
        k -= 1
    return any(t.lower() in _SUPPOSITIONS for t in tokens[k:])


def denied_after(text: str, end: int) -> bool:
    """Whether the candidate ending at `end` is followed by "is not", "fails", "isn't" ..."""
    words = [t.lower() for t in _NEG_TOKEN.findall(text[end : end + 40])[:2]]
    if not words:
        return False
    if words[0] in _FAILS or words[0] == "?":
        return True
    return len(words) == 2 and words[0] in _NEG_AFTER_VERBS and words[1] in _NEG_AFTER
