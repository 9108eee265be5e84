"""The fixed rubric parser: read a score out of the judge model's OUTPUT (never its prompt).

Two forms are accepted, both on a 0..`scale` scale:
- a line `Score: N` (optionally `N/10`, markdown bold, any case); the LAST such line counts, so a
  judge that reasons first and concludes last is read by its conclusion;
- a JSON object with a numeric `"score"` (the whole output, else the last flat `{...}` in it).
Anything else (no score, a score out of range, not a number) raises `UnreadableJudgement`: the
caller turns it into an `error` verdict, never into a 0.
"""

from __future__ import annotations

import json
import math
import re

from rlvr.errors import RlvrError

# ASCII colon only: the prompt builder rewrites a colon after "score" in the judged answer into
# a look-alike, so an answer echoed by the judge never matches this.
_SCORE_LINE = re.compile(
    r"^[ \t>*_#-]*score[ \t*_]*:[ \t*_]*([+-]?[0-9]+(?:\.[0-9]+)?)(?:[ \t]*/[ \t]*([0-9]+))?[ \t\r*_.]*$",
    re.IGNORECASE | re.MULTILINE,
)
# A JSON score counts only when the key is spelled out with an ASCII colon in the raw text (the
# prompt builder defuses that spelling in the answer; "\u0073core" escapes do not count).
_JSON_KEY = re.compile(r'"score"\s*:', re.IGNORECASE)
_OBJECT = re.compile(r"\{[^{}]{0,2000}\}")
MAX_OUTPUT_CHARS = 20_000  # a judge's reply longer than this is not read (bounded time)


class UnreadableJudgement(RlvrError, ValueError):
    """The judge answered, but not in the rubric's format (the judge failed, not the answer)."""


def parse_score(output: str, scale: int = 10) -> float:
    """The judge's score mapped to [0, 1] (N / scale). Raises `UnreadableJudgement`."""
    if not isinstance(output, str):
        raise UnreadableJudgement(f"judge output must be text, got {type(output).__name__}")
    if len(output) > MAX_OUTPUT_CHARS:
        raise UnreadableJudgement(f"judge output of {len(output)} characters is too long to read")
    lines = _SCORE_LINE.findall(output)
    if lines:
        value, out_of = lines[-1]
        if out_of and int(out_of) != scale:
            raise UnreadableJudgement(f"judge scored {value}/{out_of}, the rubric's scale is 0..{scale}")
        return _in_range(float(value), scale)
    for candidate in _json_candidates(output):
        if not _JSON_KEY.search(candidate):
            continue
        try:
            obj = json.loads(candidate, object_pairs_hook=_unique_keys)
        except ValueError:
            continue
        if isinstance(obj, dict):
            key = next((k for k in obj if isinstance(k, str) and k.lower() == "score"), None)
            if key is not None:
                value = obj[key]
                if isinstance(value, str):
                    try:
                        value = float(value.strip())
                    except ValueError:
                        raise UnreadableJudgement(f"judge's JSON score {obj[key]!r} is not a number") from None
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise UnreadableJudgement(f"judge's JSON score {value!r} is not a number")
                return _in_range(float(value), scale)
    snippet = output.strip()[-120:].replace("\n", " ")
    raise UnreadableJudgement(f"no 'Score: N' line or JSON score in the judge's output: {snippet!r}")


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [k.lower() for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate keys")
    return dict(pairs)


def _json_candidates(output: str) -> list[str]:
    stripped = output.strip()
    # The whole reply, else each flat {...} (also inside a ```json fence), the last first.
    return [stripped] + [m.group(0) for m in _OBJECT.finditer(output)][::-1]


def _in_range(value: float, scale: int) -> float:
    if not math.isfinite(value) or not 0 <= value <= scale:
        raise UnreadableJudgement(f"judge's score {value:g} is outside 0..{scale}")
    return value / scale
