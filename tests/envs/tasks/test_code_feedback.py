"""rlvr/CodeFeedback-v0: failing shown tests are fed back, up to N attempts; final or per-turn reward,
computed on held-out tests no feedback quotes; the split of a task's tests."""

from __future__ import annotations

import json

import pytest

from rlvr import envs
from rlvr.envs.tasks.code import task_from_record
from rlvr.envs.tasks.code_dataset import normalise_record
from rlvr.envs.tasks.code_feedback import HIDDEN_FAILED, NOTHING_SHOWN, CodeFeedbackEnv, split_tests
from rlvr.verifiers.verdict import Outcome
from tests.conftest import require

# leap_year's shown tests: 2024 YES, 2023 NO, 1900 NO, 2000 YES; its held-out ones: 2100 NO, 2400 YES,
# 1996 YES, 1 NO, 4 YES, 1800 NO. This misses the century rule: 1900 (shown), 2100 and 1800 (held out).
ALMOST = "```python\ny = int(input())\nprint('YES' if y % 4 == 0 else 'NO')\n```"
# Right on the four shown years only.
TABLE = "```python\ny = int(input())\nprint({2024: 'YES', 2023: 'NO', 1900: 'NO', 2000: 'YES'}.get(y, 'NO'))\n```"


def test_feedback_then_fix_gets_the_final_reward(box):
    env = CodeFeedbackEnv(max_attempts=3, sandbox=box)
    env.reset(options={"task_id": "leap_year"})
    reply, reward, terminated, truncated, info = env.step(ALMOST)
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["verdict"].outcome is Outcome.INCORRECT
    text = reply[0]["content"]
    assert reply[0]["role"] == "user" and "passed 3 of 4 shown tests" in text
    assert "test 3 (wrong answer): input '1900\\n': expected 'NO\\n', got 'YES\\n'" in text
    assert "2 attempts left" in text and "2100" not in text and "1800" not in text
    assert info["verdict"].info["shown"]["passed"] == 3 and info["verdict"].info["total"] == 6
    reply, reward, terminated, truncated, info = env.step(env.reference_action())
    assert (reply, reward, terminated, truncated) == ([], 1.0, True, False)
    assert info["verdict"].outcome is Outcome.CORRECT


def test_out_of_attempts_ends_with_the_last_attempts_score(box):
    env = CodeFeedbackEnv(max_attempts=2, scoring="fraction", sandbox=box)
    env.reset(options={"task_id": "leap_year"})
    _, reward, terminated, _, _ = env.step("no code, sorry")
    assert (reward, terminated) == (0.0, False)  # final-reward mode: nothing until the end
    reply, reward, terminated, truncated, info = env.step(ALMOST)
    assert (reply, terminated, truncated) == ([], True, False)
    # The held-out score: 4 of 6 (the 3 of 4 shown tests it passes do not count).
    assert reward == pytest.approx(4 / 6) and info["verdict"].outcome is Outcome.INCORRECT


def test_passing_the_shown_tests_only_earns_nothing_and_says_only_that(box):
    env = CodeFeedbackEnv(max_attempts=2, scoring="fraction", reward="per_turn", sandbox=box)
    env.reset(options={"task_id": "leap_year"})
    reply, reward, terminated, _, info = env.step(TABLE)
    assert not terminated and info["verdict"].info["shown"]["passed"] == 4
    assert reward == pytest.approx(3 / 6)  # 'NO' for every held-out year: right on 2100, 1 and 1800
    assert reply[0]["content"].startswith(HIDDEN_FAILED)


def test_per_turn_rewards_each_attempt(box):
    env = CodeFeedbackEnv(max_attempts=3, reward="per_turn", scoring="fraction", sandbox=box)
    env.reset(options={"task_id": "leap_year"})
    rewards = [env.step(ALMOST)[1], env.step(env.reference_action())[1]]
    assert rewards == [pytest.approx(4 / 6), 1.0]


def test_format_error_feedback_and_a_dataset_source(box, tmp_path):
    path = tmp_path / "one.jsonl"
    path.write_text(
        json.dumps(
            {
                "id": "sq",
                "prompt": "Write `sq(x)`.",
                "entry_point": "sq",
                "tests": [{"fn": "sq", "args": [3], "expected": 9}],
                "reference": "def sq(x):\n    return x * x",
            }
        )
        + "\n"
    )
    env = CodeFeedbackEnv(source=str(path), sandbox=box)
    obs, info = env.reset(seed=0)
    assert info["task_id"] == "sq"
    reply, _, _, _, info = env.step("Let me think.")
    assert info["verdict"].outcome is Outcome.FORMAT_ERROR and "```python code block" in reply[0]["content"]
    # A single test is held out: the feedback quotes nothing of it.
    reply, _, _, _, _ = env.step("```python\ndef sq(x):\n    return x + x\n```")
    assert reply[0]["content"].startswith(NOTHING_SHOWN)
    assert "9" not in reply[0]["content"].split("(")[0] and "sq(3)" not in reply[0]["content"]


def test_check_env_passes(box):
    check_env = getattr(envs, "check_env", None)
    require(check_env is not None, "rlvr.envs.check_env is not available yet")
    check_env(envs.make("rlvr/CodeFeedback-v0", difficulty=1, max_attempts=2), seeds=(0, 1))


def test_bad_arguments():
    with pytest.raises(ValueError, match="reward"):
        CodeFeedbackEnv(reward="sometimes")
    with pytest.raises(ValueError, match="max_turns"):
        CodeFeedbackEnv(max_attempts=0)
    with pytest.raises(ValueError, match="difficulty applies"):
        CodeFeedbackEnv(source="x.jsonl", difficulty=1)


def _task(record: dict, line: int = 1):
    return task_from_record(normalise_record(record, line))


def test_builtin_split_shows_tests_and_holds_out_heldout_tests():
    env = CodeFeedbackEnv()
    for task in env.tasks:
        split = env.splits[task.task_id]
        assert len(split.heldout) == task.metadata["n_heldout"] == 6, task.task_id
        assert split.shown + split.heldout == task.answer


def test_jsonl_split_rule():
    # MBPP: the first assert is quoted in the statement (shown); of the other two, one is shown, one held out.
    mbpp = _task(
        {
            "task_id": 1,
            "text": "Write add.",
            "code": "def add(a, b):\n    return a + b",
            "test_list": ["assert add(1, 2) == 3", "assert add(2, 2) == 4", "assert add(5, 1) == 6"],
        }
    )
    split = split_tests(mbpp)
    assert [t.code for t in split.shown] == ["assert add(1, 2) == 3", "assert add(2, 2) == 4"]
    assert [t.code for t in split.heldout] == ["assert add(5, 1) == 6"]
    # Stdin tests: the example in the statement is shown; of the other four, the later two are held out,
    # but not one repeating a shown input.
    io = _task(
        {
            "id": "io",
            "prompt": "Print the sum. Example: input `1 2` gives 3.",
            "tests": [
                {"stdin": s, "stdout": o}
                for s, o in [("1 2", "3"), ("4 4", "8"), ("5 5", "10"), ("4  4\n", "8"), ("7 0", "7")]
            ],
        }
    )
    split = split_tests(io)
    assert [t.stdin for t in split.shown] == ["1 2", "4 4", "5 5", "4  4\n"]
    assert [t.stdin for t in split.heldout] == ["7 0"]
    # A single test, or tests all quoted by the statement: everything held out, nothing shown.
    one = _task(
        {
            "id": "sq",
            "prompt": "Write `sq(x)`.",
            "entry_point": "sq",
            "tests": [{"fn": "sq", "args": [3], "expected": 9}],
        }
    )
    assert split_tests(one).shown == () and len(split_tests(one).heldout) == 1
    quoted = _task(
        {
            "id": "q",
            "prompt": "Write `sq(x)`: sq(3) is 9, sq(4) is 16.",
            "entry_point": "sq",
            "tests": [{"fn": "sq", "args": [3], "expected": 9}, {"fn": "sq", "args": [4], "expected": 16}],
        }
    )
    assert split_tests(quoted).shown == () and len(split_tests(quoted).heldout) == 2
    # A record's own `heldout_tests` win.
    declared = _task(
        {
            "id": "d",
            "prompt": "Write `sq(x)`.",
            "entry_point": "sq",
            "tests": [{"fn": "sq", "args": [3], "expected": 9}],
            "heldout_tests": [{"fn": "sq", "args": [5], "expected": 25}],
        }
    )
    assert [t.args for t in split_tests(declared).shown] == [(3,)]
    assert [t.args for t in split_tests(declared).heldout] == [(5,)]
