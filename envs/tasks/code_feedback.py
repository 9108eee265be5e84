"""`rlvr/CodeFeedback-v0`: write a program, read the failing tests, try again.

Each turn the model answers with code; the environment runs the task's tests and replies with
feedback on the failing ones, up to `max_attempts` attempts.

What the model may see and what it is paid on are never the same tests. Each task's tests are
split in two (`TestSplit`):
- shown tests: the feedback may quote them (input, expected and actual output, or the error);
  the statement's own examples count as shown;
- held-out tests: the reward and the verdict are computed on these alone, and no feedback quotes
  them: not their inputs, expected values or the program's outputs, not even how many passed.
  No held-out test repeats an input the statement or a shown test reveals.
So a policy that replays what the feedback showed (a lookup table of quoted inputs and expected
values) scores what a stub scores; only a program that solves the task earns the reward.

Each attempt runs the shown tests in one sandbox call and the held-out ones in another, each
from a spec holding only its own tests' inputs: a shown test's process is forked from a harness
that never held a held-out input, so nothing it prints (and the feedback quotes) can carry one;
held-out expected values never enter the sandbox (they are judged on the host). Every attempt's
verifications share the episode's time, `max_episode_s`, whatever the number of tests or
attempts: what runs past it fails as a timeout and the episode ends (a policy cannot stall a
trainer for minutes with a slow wrong program). The attempt's verdict is the held-out one: its score is the
fraction of held-out tests passed (`scoring="fraction"`) or 1 iff all pass (the default), its
outcome `correct` iff all pass; `verdict.info["shown"]` holds the shown tests' results. The
episode ends when an attempt passes every held-out test (or the verdict is `error`), else after
`max_attempts` attempts. The reply after a failed attempt quotes up to 3 failing shown tests; if
every shown test passed it says only that the hidden tests did not (which the episode going on
already tells). The reward is the final attempt's held-out score, given on the last turn
(`reward="final"`, earlier turns get 0), or each attempt's held-out score on its turn
(`reward="per_turn"`).

The split. Built-in tasks (`source="builtin"`, with `difficulty`) are `rlvr/Code-v0`'s: `tests`
are shown, their generated `heldout_tests` are held out. A JSONL file in any shape
`rlvr/CodeDataset-v0` reads (`source="path/to/file.jsonl"`) uses its records' `heldout_tests`
where they have them, else this rule, in the file's order of tests: a test whose input the
statement reveals (a stdin, a call's argument list or an assert line found in the prompt) is
shown; of the others, the first half (rounded down) is shown and the second half held out, except
that a test repeating a shown input is shown. If that leaves nothing to hold out (a task with a
single test, or all of its tests in the statement), every test is held out and the feedback
quotes none: it says only that the attempt failed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rlvr.envs.core import MultiTurnEnv, Task, TurnResult
from rlvr.envs.tasks.code import CodeTaskSource, builtin_tasks
from rlvr.envs.tasks.code_dataset import load_dataset
from rlvr.verifiers.code import AssertTest, CallTest, IOTest, Test
from rlvr.verifiers.verdict import Outcome, Verdict

REWARD_MODES = ("final", "per_turn")
SHOW_FAILURES = 3  # failing shown tests quoted per reply
HIDDEN_FAILED = (
    "Your code passed every shown test, but not the hidden tests it is scored on: make sure it "
    "solves the task for every valid input, not only for the inputs shown."
)
NOTHING_SHOWN = "Your code did not pass the hidden tests it is scored on (this task shows no test details)."
MAX_EPISODE_S = 40.0  # the verifications of one episode, all attempts together


@dataclass(frozen=True)
class TestSplit:
    """A task's tests: `shown` ones the feedback may quote, `heldout` ones the reward is computed on."""

    shown: tuple[Test, ...]
    heldout: tuple[Test, ...]

    __test__ = False  # not a pytest test class


def _squash(text: str) -> str:
    return " ".join(text.split())


def input_key(test: Test) -> str:
    """What a test reveals as its input: equal keys, equal inputs."""
    if isinstance(test, IOTest):
        return "io:" + _squash(test.stdin)
    if isinstance(test, CallTest):
        return "call:" + json.dumps([test.fn, list(test.args), dict(test.kwargs)], sort_keys=True)
    return "assert:" + _squash(test.code)


def revealed_by(test: Test, prompt: str) -> bool:
    """Whether the statement quotes the test's input (conservatively: a test wrongly judged
    revealed is only shown, never leaked)."""
    text = _squash(prompt)
    if isinstance(test, IOTest):
        return bool(_squash(test.stdin)) and _squash(test.stdin) in text
    if isinstance(test, CallTest):
        if not test.args and not test.kwargs:
            return True  # nothing to hide: a call without arguments
        renderings = (json.dumps(list(test.args))[1:-1], repr(list(test.args))[1:-1])
        return any(r and _squash(r) in text for r in renderings)
    assert isinstance(test, AssertTest)
    return any(_squash(line) in text for line in test.code.splitlines() if _squash(line))


def split_tests(task: Task) -> TestSplit:
    """The split this module's docstring states: a declared one (`metadata["n_heldout"]`, the
    record's `heldout_tests`), else the rule for JSONL tasks."""
    tests = tuple(task.answer)
    declared = int(task.metadata.get("n_heldout") or 0)
    if declared:
        return TestSplit(tests[:-declared], tests[-declared:])
    prompt = "\n".join(m["content"] for m in task.prompt)
    revealed = [revealed_by(t, prompt) for t in tests]
    rest = [i for i, r in enumerate(revealed) if not r]
    shown = {i for i, r in enumerate(revealed) if r} | set(rest[: len(rest) // 2])
    shown_keys = {input_key(tests[i]) for i in shown}
    heldout = [i for i in rest[len(rest) // 2 :] if input_key(tests[i]) not in shown_keys]
    if not heldout:
        return TestSplit((), tests)
    return TestSplit(tuple(t for i, t in enumerate(tests) if i not in heldout), tuple(tests[i] for i in heldout))


def heldout_verdict(shown: Verdict | None, held: Verdict, scoring: str) -> Verdict:
    """The attempt's verdict: the held-out tests' (`held`), with the shown tests' results
    (`shown`, None when the task shows none) under `info["shown"]`. A format error or `error` of
    either is passed on as it is."""
    for verdict in (shown, held):
        if verdict is not None and verdict.outcome in (Outcome.FORMAT_ERROR, Outcome.ERROR):
            return verdict
    results = list(held.info.get("tests", []))
    shown_results = list(shown.info.get("tests", [])) if shown is not None else []
    passed = sum(bool(t["passed"]) for t in results)
    total = len(results)
    all_passed = passed == total
    score = passed / total if scoring == "fraction" else float(all_passed)
    shown_passed = sum(bool(t["passed"]) for t in shown_results)
    info = dict(held.info) | {
        "total": total,
        "passed": passed,
        "tests": results,
        "shown": {"total": len(shown_results), "passed": shown_passed, "tests": shown_results},
    }
    detail = f"{passed}/{total} held-out tests passed ({shown_passed}/{len(shown_results)} shown tests passed)"
    return Verdict(score, Outcome.CORRECT if all_passed else Outcome.INCORRECT, detail, info)


def out_of_time(n_heldout: int, max_episode_s: float) -> Verdict:
    """An attempt made after the episode's time ran out: every held-out test fails, unrun."""
    tests = [
        {"index": i, "kind": "", "status": "timeout", "detail": "the episode's time budget ran out", "passed": False}
        for i in range(n_heldout)
    ]
    info = {"total": n_heldout, "passed": 0, "tests": tests, "shown": {"total": 0, "passed": 0, "tests": []}}
    info["trust"] = "isolated"
    return Verdict(0.0, Outcome.INCORRECT, f"the episode's {max_episode_s:g} s of verification ran out", info)


def feedback_message(verdict: Verdict, attempt: int, max_attempts: int) -> str:
    """The reply after a failed attempt: which shown tests failed and how, then what to do.
    Nothing of the held-out tests (`verdict.info["tests"]`) is read here."""
    shown = verdict.info.get("shown", {})
    tests = shown.get("tests", [])
    if verdict.outcome is Outcome.FORMAT_ERROR:
        body = "I could not find a ```python code block in your answer."
    elif not shown.get("total"):
        body = NOTHING_SHOWN
    elif shown.get("passed") == shown.get("total"):
        body = HIDDEN_FAILED
    else:
        failed = [t for t in tests if not t["passed"] and t["status"] != "skipped"]
        lines = [f"Your code passed {shown['passed']} of {shown['total']} shown tests."]
        for t in failed[:SHOW_FAILURES]:
            lines.append(f"- test {t['index'] + 1} ({t['status'].replace('_', ' ')}): {t['detail']}")
        if len(failed) > SHOW_FAILURES:
            lines.append(f"- ... and {len(failed) - SHOW_FAILURES} more failing shown tests")
        body = "\n".join(lines)
    left = max_attempts - attempt
    return (
        f"{body}\n\nFix the code and answer again with the complete code in one ```python code block "
        f"({left} attempt{'s' if left != 1 else ''} left)."
    )


class CodeFeedbackEnv(CodeTaskSource, MultiTurnEnv):
    """Multi-turn programming: after each failed attempt the failing shown tests are quoted, up to N
    attempts; the reward is computed on held-out tests no feedback quotes."""

    version = "0"

    def __init__(
        self,
        source: str = "builtin",
        difficulty: int | Sequence[int] | None = None,
        max_attempts: int = 3,
        reward: str = "final",
        scoring: str = "all_or_nothing",
        timeout_s: float = 4.0,
        sandbox: Any = None,
        render_mode: str | None = None,
        max_episode_s: float = MAX_EPISODE_S,
    ):
        super().__init__(max_turns=max_attempts, render_mode=render_mode)
        if not max_episode_s > 0:
            raise ValueError(f"max_episode_s must be positive, got {max_episode_s!r}")
        self.max_episode_s = float(max_episode_s)
        self._spent_s = 0.0
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
        self.splits = {t.task_id: split_tests(t) for t in self.tasks}

    def _on_reset(self) -> None:
        super()._on_reset()
        self._spent_s = 0.0

    def respond(self, action: str) -> TurnResult:
        split = self.splits[self.task.task_id]
        verdict = self._attempt(split, action)
        last = self.turns >= self.max_attempts or self._spent_s >= self.max_episode_s
        done = verdict.outcome in (Outcome.CORRECT, Outcome.ERROR) or last
        reward = verdict.score if (done or self.reward_mode == "per_turn") else 0.0
        if done:
            return TurnResult([], reward, True, verdict)
        feedback = feedback_message(verdict, self.turns, self.max_attempts)
        return TurnResult([{"role": "user", "content": feedback}], reward, False, verdict)

    def _attempt(self, split: TestSplit, action: str) -> Verdict:
        """The shown tests (every one, for the feedback), then the held-out ones, in two sandbox
        calls within what is left of the episode's time."""
        start = time.monotonic()
        try:
            shown = None
            if split.shown:
                left = self.max_episode_s - self._spent_s
                if left <= 0:
                    return out_of_time(len(split.heldout), self.max_episode_s)
                shown = self.verify_response(self.task, action, fail_fast=False, tests=split.shown, wall_s=left)
                if shown.outcome in (Outcome.FORMAT_ERROR, Outcome.ERROR):
                    return shown
            left = self.max_episode_s - self._spent_s - (time.monotonic() - start)
            if left <= 0:
                return out_of_time(len(split.heldout), self.max_episode_s)
            held = self.verify_response(self.task, action, tests=split.heldout, wall_s=left)
            return heldout_verdict(shown, held, self.scoring)
        finally:
            self._spent_s += time.monotonic() - start
