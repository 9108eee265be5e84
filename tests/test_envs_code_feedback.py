"""rlvr/CodeFeedback-v0: failing tests are fed back, up to N attempts; final or per-turn reward."""
from __future__ import annotations

import json

import pytest

import envs
from conftest import require
from envs.code_feedback import CodeFeedbackEnv
from sandbox.types import Limits, Status
from verifiers.verdict import Outcome

# leap_year's tests: 2024 YES, 2023 NO, 1900 NO, 2000 YES. This misses the century rule (1900).
ALMOST = "```python\ny = int(input())\nprint('YES' if y % 4 == 0 else 'NO')\n```"


@pytest.fixture(scope="module")
def box():
    import sandbox

    require(hasattr(sandbox, "shared_sandbox"), "sandbox.shared_sandbox is not available")
    shared = sandbox.shared_sandbox()
    probe = shared.run(files={}, command=["python3", "-c", "print(1)"], stdin="", limits=Limits())
    require(probe.status is not Status.UNAVAILABLE, f"the Docker sandbox is unavailable: {probe.detail}")
    return shared


def test_feedback_then_fix_gets_the_final_reward(box):
    env = CodeFeedbackEnv(max_attempts=3, sandbox=box)
    env.reset(options={"task_id": "leap_year"})
    reply, reward, terminated, truncated, info = env.step(ALMOST)
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["verdict"].outcome is Outcome.INCORRECT
    text = reply[0]["content"]
    assert reply[0]["role"] == "user" and "passed 3 of 4 tests" in text
    assert "test 3 (wrong answer): input '1900\\n': expected 'NO\\n', got 'YES\\n'" in text
    assert "2 attempts left" in text
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
    assert reward == pytest.approx(0.75) and info["verdict"].outcome is Outcome.INCORRECT


def test_per_turn_rewards_each_attempt(box):
    env = CodeFeedbackEnv(max_attempts=3, reward="per_turn", scoring="fraction", sandbox=box)
    env.reset(options={"task_id": "leap_year"})
    rewards = [env.step(ALMOST)[1], env.step(env.reference_action())[1]]
    assert rewards == [pytest.approx(0.75), 1.0]


def test_format_error_feedback_and_a_dataset_source(box, tmp_path):
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"id": "sq", "prompt": "Write `sq(x)`.", "entry_point": "sq",
                                "tests": [{"fn": "sq", "args": [3], "expected": 9}],
                                "reference": "def sq(x):\n    return x * x"}) + "\n")
    env = CodeFeedbackEnv(source=str(path), sandbox=box)
    obs, info = env.reset(seed=0)
    assert info["task_id"] == "sq"
    reply, _, _, _, info = env.step("Let me think.")
    assert info["verdict"].outcome is Outcome.FORMAT_ERROR and "```python code block" in reply[0]["content"]
    reply, _, _, _, _ = env.step("```python\ndef sq(x):\n    return x + x\n```")
    assert "sq(3): expected 9, got 6" in reply[0]["content"]


def test_check_env_passes(box):
    check_env = getattr(envs, "check_env", None)
    require(check_env is not None, "envs.check_env is not available yet")
    check_env(envs.make("rlvr/CodeFeedback-v0", difficulty=1, max_attempts=2), seeds=(0, 1))


def test_bad_arguments():
    with pytest.raises(ValueError, match="reward"):
        CodeFeedbackEnv(reward="sometimes")
    with pytest.raises(ValueError, match="max_turns"):
        CodeFeedbackEnv(max_attempts=0)
    with pytest.raises(ValueError, match="difficulty applies"):
        CodeFeedbackEnv(source="x.jsonl", difficulty=1)
