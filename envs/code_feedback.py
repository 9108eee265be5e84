"""`rlvr/CodeFeedback-v0`: write a program, read the failing tests, try again.

Each turn the model answers with code; the environment runs the tests. If they all pass the
episode ends. Otherwise the environment replies with the failing tests' feedback (input,
expected and actual output, or the error) and the model tries again, up to `max_attempts`
attempts. The reward is the final attempt's score, given on the last turn (`reward="final"`,
earlier turns get 0), or each attempt's own score on its turn (`reward="per_turn"`).

Tasks come from `rlvr/Code-v0`'s built-in set (`source="builtin"`, with `difficulty`) or from a
JSONL file in any shape `rlvr/CodeDataset-v0` reads (`source="path/to/file.jsonl"`).
"""
from __future__ import annotations

from typing import Any, Sequence

from envs.code import CodeTaskSource, builtin_tasks
from envs.code_dataset import load_dataset
from envs.core import MultiTurnEnv, TurnResult
from verifiers.verdict import Outcome, Verdict

REWARD_MODES = ("final", "per_turn")
SHOW_FAILURES = 3  # failing tests quoted per reply


def feedback_message(verdict: Verdict, attempt: int, max_attempts: int) -> str:
    """The reply after a failed attempt: which tests failed and how, then what to do."""
    if verdict.outcome is Outcome.FORMAT_ERROR:
        body = "I could not find a ```python code block in your answer."
    else:
        tests = verdict.info.get("tests", [])
        failed = [t for t in tests if not t["passed"] and t["status"] != "skipped"]
        lines = [f"Your code passed {verdict.info.get('passed', 0)} of {verdict.info.get('total', len(tests))} tests."]
        for t in failed[:SHOW_FAILURES]:
            lines.append(f"- test {t['index'] + 1} ({t['status'].replace('_', ' ')}): {t['detail']}")
        if len(failed) > SHOW_FAILURES:
            lines.append(f"- ... and {len(failed) - SHOW_FAILURES} more failing tests")
        body = "\n".join(lines)
    left = max_attempts - attempt
    return f"{body}\n\nFix the code and answer again with the complete code in one ```python code block " \
           f"({left} attempt{'s' if left != 1 else ''} left)."


class CodeFeedbackEnv(CodeTaskSource, MultiTurnEnv):
    """Multi-turn programming: after each failed attempt the failing tests are shown, up to N attempts."""

    version = "0"

    def __init__(self, source: str = "builtin", difficulty: int | Sequence[int] | None = None,
                 max_attempts: int = 3, reward: str = "final", scoring: str = "all_or_nothing",
                 timeout_s: float = 4.0, sandbox: Any = None, render_mode: str | None = None):
        super().__init__(max_turns=max_attempts, render_mode=render_mode)
        if reward not in REWARD_MODES:
            raise ValueError(f"reward must be one of {REWARD_MODES}, got {reward!r}")
        if source == "builtin":
            tasks = builtin_tasks(difficulty)
        else:
            if difficulty is not None:
                raise ValueError("difficulty applies to source='builtin' only")
            tasks = load_dataset(source)
        self.source = source
        self.max_attempts = max_attempts
        self.reward_mode = reward
        self._init_tasks(tasks, sandbox, scoring, timeout_s)

    def respond(self, action: str) -> TurnResult:
        # Feedback needs the failing tests, not only the first: run them all, one sandbox call.
        verdict = self.verify_response(self.task, action, fail_fast=False)
        last = self.turns >= self.max_attempts
        done = verdict.outcome in (Outcome.CORRECT, Outcome.ERROR) or last
        reward = verdict.score if (done or self.reward_mode == "per_turn") else 0.0
        if done:
            return TurnResult([], reward, True, verdict)
        feedback = feedback_message(verdict, self.turns, self.max_attempts)
        return TurnResult([{"role": "user", "content": feedback}], reward, False, verdict)
