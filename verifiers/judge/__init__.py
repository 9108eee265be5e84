"""Judge rewards: a judge model behind an OpenAI-compatible URL grades an answer against a rubric.

`Judge(base_url, model, ...)` (a reward function `fn(response, gold) -> Verdict`, also
`.score(answer, question, reference)` and `.score_many(items)`); `parse_score` is the fixed
rubric parser; `build_prompt` the delimited prompt. Plain urllib: no client library needed.
"""

from rlvr.verifiers.judge.client import JudgeUnavailable
from rlvr.verifiers.judge.judge import Judge, JudgeItem
from rlvr.verifiers.judge.parse import UnreadableJudgement, parse_score
from rlvr.verifiers.judge.prompt import DEFAULT_RUBRIC, neutralize
from rlvr.verifiers.judge.prompt import build as build_prompt

__all__ = [
    "DEFAULT_RUBRIC",
    "Judge",
    "JudgeItem",
    "JudgeUnavailable",
    "UnreadableJudgement",
    "build_prompt",
    "neutralize",
    "parse_score",
]
