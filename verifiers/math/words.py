"""The closed word classes of the final-answer grammar (see `final_answer` for the grammar itself).

A word inside an answer's region is read only if it belongs to one of these classes; any other
word makes the region no answer (`\\boxed{5 \\text{ is the wrong answer}}`, `\\text{half of } 10`).
Around the region, the classes that can take an answer back (retractions, doubts, hedges) are
named here too, so that every word the grammar acts on is in one place.

In the region (`grammar.Parser` with `strict=True`, `parse.parse_answer`):
- units of measure: `units.TABLE`, with `square`/`cubic`/`per`, and the angle and percent words;
- MULTIPLIERS after a number scale it (`5 thousand` is 5000, `2 dozen` is 24, `\\$5\\text{k}` is
  5000 dollars);
- APPROXIMATE before a value marks the answer approximate: it is never right for an exact gold
  (one with no decimal), whatever digits follow;
- FILLERS stand before or after a value and change nothing (`\\text{the answer is } 5`, `12 in total`);
- a counted noun after a number (`12 apples`, `twelve marbles`): at most two words that are not
  OPERATIVE, the words that change, compare, deny, hedge or judge a value (`factorial`, `half`,
  `minus`, `wrong`, `maybe`, `least`) or tie a clause together (`is`, `than`, `which`);
- NUMBER_WORDS, spelled-out integers (`twenty-five`, `three hundred and five`), see `spelled`;
- SPECIAL answers, phrases with a fixed meaning (`no solution`, `does not exist`, `all real numbers`).
"""

from __future__ import annotations

import re

MULTIPLIERS = {
    "dozen": 12,
    "dozens": 12,
    "hundred": 100,
    "hundreds": 100,
    "thousand": 1000,
    "thousands": 1000,
    "k": 1000,
    "million": 10**6,
    "millions": 10**6,
    "mn": 10**6,
    "billion": 10**9,
    "billions": 10**9,
    "bn": 10**9,
    "trillion": 10**12,
}
APPROXIMATE = {"approximately", "approx", "about", "around", "roughly", "nearly", "almost", "circa", "ca"}
# a word, not a command: `\\approx` is a relation the grammar reads (`x \\approx 4`)
APPROXIMATE_RE = re.compile(r"(?<![\\A-Za-z])(?:" + "|".join(sorted(APPROXIMATE)) + r")(?![A-Za-z])", re.IGNORECASE)
FILLERS = {
    "the",
    "a",
    "an",
    "answer",
    "final",
    "value",
    "result",
    "total",
    "is",
    "equals",
    "exactly",
    "units",
    "unit",
    "in",
    "all",
    "each",
}
# Words that change, compare, deny, hedge or judge a value, or build a clause around it: never a
# counted noun. Grouped by what they do; a word here after a number makes the region no answer.
OPERATIVE = frozenset(
    # negation and exclusion
    "not no never none neither nor non without except excluding but cannot isn't aren't wasn't".split()
    # alternatives, modality and doubt
    + "or either maybe perhaps possibly possible probably likely unlikely might could would should may must "
    "guess guessed think thought believe assume assumed suppose supposed estimate estimated ish unsure "
    "uncertain".split()
    # comparison and range
    + "than least most more less fewer greater smaller larger bigger over under above below between within "
    "up to upto nearly almost roughly approximately approx about around circa ca at".split()
    # arithmetic and fractions of a value
    + "plus minus times divided multiplied half halves halved double doubled twice thrice triple tripled "
    "quadruple squared cubed square cube root roots power powers factorial inverse reciprocal negative "
    "positive opposite percent percentage fold third thirds quarter quarters fourth fourths fifth fifths "
    "tenth tenths hundredth hundredths thousandth thousandths".split()
    # judgement
    + "wrong incorrect false true right correct mistake mistaken error typo invalid valid rejected "
    "impossible answer answers solution solutions".split()
    # clause words
    + "is are was were be been being am do does did has have had will shall can of to for with by from "
    "as so which that this these those it its if when where because since then hence therefore thus "
    "and the a an i we you he she they".split()
)
MAX_COUNTED_WORDS = 2

# Phrases with a fixed meaning, by the canonical text they read as; written as `parse.normal_text` leaves them
# (lower case, no articles, punctuation as spaces).
SPECIAL = {
    "no solution": (
        "no solution",
        "no solutions",
        "no real solution",
        "no real solutions",
        "none",
        "empty set",
        "there is no solution",
        "there are no solutions",
        "no such number",
    ),
    "dne": ("dne", "does not exist", "doesn t exist", "it does not exist", "limit does not exist", "undefined"),
    "all real numbers": (
        "all real numbers",
        "all reals",
        "real numbers",
        "r",
        "all real x",
        "every real number",
        "all real values",
    ),
}
SPECIAL_TEXT = {phrase: canonical for canonical, phrases in SPECIAL.items() for phrase in phrases}

NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen".split()
    )
} | {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2)}
SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9, "trillion": 10**12}


def spelled_number(words: list[str]) -> tuple[int, int] | None:
    """The integer that the leading words spell (`twenty five`, `three hundred and five`, `ten
    thousand`) and how many words it took; None if the first word is no number word. Hyphens
    are split off before (`twenty-five` is two words)."""
    total, group, used, last = 0, 0, 0, None
    for k, word in enumerate(words):
        if word in NUMBER_WORDS:
            value = NUMBER_WORDS[word]
            if last == "unit" or last == "tens" and (value >= 10 or value == 0):
                break  # "five six", "twenty thirty": not one number
            group += value
            last = "tens" if value >= 20 else "unit"
        elif word in SCALES and last in ("unit", "tens", "hundred"):
            scale = SCALES[word]
            if scale == 100:
                group *= 100
                last = "hundred"
            else:
                total += group * scale
                group, last = 0, "scale"
        elif word == "and" and last in ("hundred", "scale") and k + 1 < len(words) and words[k + 1] in NUMBER_WORDS:
            continue
        else:
            break
        used = k + 1
    return (total + group, used) if used else None


# Around the region. A retraction says the answer is wrong: between two boxes it leaves the later
# one; after the final answer it takes it back (a later marked answer is then the final one). A
# doubt after it takes it back too; a hedge offers another value beside it. (Weaker words, "wait",
# "actually", "no,", take an answer back only when a new value follows them: WEAK_RETRACTION_RE.)
RETRACTIONS = (
    "scratch that",
    "on second thought",
    "on reflection",
    "i was wrong",
    "that's wrong",
    "that is wrong",
    "that was wrong",
    "that's not right",
    "that is not right",
    "that can't be right",
    "don't think that's right",
    "don't think this is right",
    "not the answer",
    "i made a mistake",
    "i made an error",
    "i forgot",
    "i missed",
    "i overlooked",
    "misread",
    "miscounted",
    "miscalculated",
)
DOUBTS = (
    "not sure",
    "not 100% sure",
    "not certain",
    "not confident",
    "unsure",
    "uncertain",
    "i doubt",
    "just a guess",
    "i guess",
    "might be wrong",
    "may be wrong",
    "could be wrong",
)
HEDGES = (
    "or maybe",
    "or perhaps",
    "or possibly",
    "could also be",
    "might also be",
    "may also be",
    "is also possible",
    "also possible",
    "alternatively",
    "instead",
    "possibly",
    "perhaps",
    "maybe",
)


def _phrases(phrases: tuple[str, ...]) -> re.Pattern:
    words = "|".join(re.escape(p).replace("\\ ", r"\s+") for p in sorted(phrases, key=len, reverse=True))
    return re.compile(rf"(?<![A-Za-z])(?:{words})(?![A-Za-z])", re.IGNORECASE)


RETRACTION_RE = _phrases(RETRACTIONS)
DOUBT_RE = _phrases(DOUBTS)
HEDGE_RE = _phrases(HEDGES)

# Words that retract an earlier boxed answer (a self-correction), searched between two boxes; with
# RETRACTION_RE, the later box is then the answer.
CORRECTION_RE = re.compile(
    r"\b(?:wait|actually|oops|mistakes?|mistaken|errors?|wrong|incorrect|correct(?:ion|ing|ed)|re-?check\w*|"
    r"recalculat\w*|recomput\w*|re-?do|re-?evaluat\w*|reconsider\w*|revis\w*|scratch that|no[,.;!]|second thought|"
    r"miscount\w*|miscalculat\w*|not (?:right|correct)|instead|should (?:be|have))",
    re.IGNORECASE,
)
# Words after an answer phrase that take it back when a value follows ("The answer is 2. ... no, it is
# 3."): stronger than CORRECTION_RE, since checking work after an answer ("let me recheck: 2*3 = 6") is common.
WEAK_RETRACTION_RE = re.compile(
    r"\b(?:wait|actually|oops|mistakes?|mistaken|wrong|incorrect|correction|scratch that|on second thought|"
    r"on reflection|misread\w*|mis-\w+|miscount\w*|miscalculat\w*|corrected|not (?:right|correct)|instead)\b"
    r"|\bno[,.;!]",
    re.IGNORECASE,
)
# Words that take back the final answer even when no new one follows ("... was 20, but that was wrong").
TAKEN_BACK_RE = re.compile(
    r"\b(?:(?:was|is|that's|that is|it's|it is|this is)\s(?:wrong|incorrect|not (?:right|correct)|a mistake|an error)|"
    r"scratch that|I was wrong|misread\w*|I made an? (?:mistake|error)|(?:wrong|incorrect) answer|not the answer|"
    r"which is (?:a typo|wrong|incorrect|false|a mistake|an error)|typo|"
    r"(?:is|are|was|were) (?:mistaken|false|rejected))\b",
    re.IGNORECASE,
)
