"""The TRL adapter on worked cases: `trl_dataset`'s rows, and `EnvReward` called as `trl.GRPOTrainer` 1.x
calls a reward function (`prompts`, `completions`, `completion_ids`, every dataset column and
`log_metric` as keywords), scoring with the environment's own verifier: a right answer 1.0, a wrong one
0.0, no marked answer 0.0 (`format_error`), a grader failure None (`error`: TRL leaves it out), a
completion cut at the token limit 0.0 (`truncated`) when the stop tokens are given."""

from __future__ import annotations

from collections import defaultdict

import pytest

from rlvr import envs
from rlvr.envs.adapters.keys import AdapterError
from rlvr.envs.adapters.scoring import Score
from rlvr.envs.adapters.trl import TASK_COLUMN, EnvReward, completion_text, trl_dataset
from rlvr.verifiers.verdict import Outcome

ARITHMETIC = "rlvr/Arithmetic-v0"
# Arithmetic whose grader is down for its first 10**9 verifications (tests/run_test_envs.py): every verdict `error`
OUTAGE = "tests.run_test_envs:test/GraderOutage-v0"
EOS, PAD = 2, 0


def answer(seed: int, **env_args) -> str:
    env = envs.make(ARITHMETIC, **env_args)
    env.reset(seed=seed)
    return env.unwrapped.task.answer


def call(reward: EnvReward, dataset, texts: list[str], ids: list[list[int]] | None = None):
    """`reward` called as GRPOTrainer calls it: one completion per text, on the dataset's rows in turn (the
    conversational format: each completion a list of one assistant message), with a `log_metric`."""
    rows = [dataset[i % len(dataset)] for i in range(len(texts))]
    logged = defaultdict(list)
    rewards = reward(
        prompts=[r["prompt"] for r in rows],
        completions=[[{"role": "assistant", "content": t}] for t in texts],
        completion_ids=ids or [[5, EOS]] * len(texts),
        **{TASK_COLUMN: [r[TASK_COLUMN] for r in rows]},
        trainer_state=None,
        log_extra=lambda column, values: None,
        log_metric=lambda name, value: logged[name].append(value),
    )
    return rewards, logged


def test_the_dataset_is_in_trls_conversational_format_with_the_task_key():
    dataset = trl_dataset(ARITHMETIC, tasks=3, env_args={"difficulty": 2})
    assert dataset.column_names == ["prompt", TASK_COLUMN] and len(dataset) == 3
    prompt = envs.make(ARITHMETIC).reset(seed=0)[0]
    assert dataset[0]["prompt"] == prompt and prompt[0]["role"] == "user"


def test_worked_cases_right_wrong_and_unreadable():
    dataset = trl_dataset(ARITHMETIC, tasks=1)
    right = answer(0)
    texts = [f"So \\boxed{{{right}}}.", f"\\boxed{{{int(right) + 1}}}", f"I think {right}", f"The answer is {right}"]
    reward = EnvReward()
    rewards, logged = call(reward, dataset, texts)
    assert rewards == [1.0, 0.0, 0.0, 1.0]
    outcomes = [Outcome.CORRECT, Outcome.INCORRECT, Outcome.FORMAT_ERROR, Outcome.CORRECT]
    assert [s.outcome for s in reward.last] == outcomes
    assert all(type(s) is Score and type(s.reward) is float for s in reward.last)
    assert logged["rlvr/correct"] == [0.5] and logged["rlvr/format_error"] == [0.25] and logged["rlvr/error"] == [0.0]
    assert reward.summary() == "4 completions scored: 2 correct, 1 incorrect, 1 format_error"
    reward.close()


def test_a_grader_failure_is_none_never_a_reward():
    dataset = trl_dataset(OUTAGE, tasks=2, env_args={"outage": 10**9, "key": "adapters-trl"})
    reward = EnvReward(max_workers=2)
    rewards, logged = call(reward, dataset, ["\\boxed{1}", "\\boxed{2}"])
    assert rewards == [None, None]
    assert [s.outcome for s in reward.last] == [Outcome.ERROR, Outcome.ERROR]
    assert "the grader is down" in reward.last[0].detail and logged["rlvr/error"] == [1.0]
    reward.close()


def test_a_cut_completion_earns_nothing_when_the_stop_tokens_are_given():
    dataset = trl_dataset(ARITHMETIC, tasks=1)
    text = f"\\boxed{{{answer(0)}}}"
    ids = [[7, 8, EOS], [7, 8, 9]]  # the second ends on no stop token: cut at max_completion_length
    graded, _ = call(EnvReward(), dataset, [text, text], ids)
    assert graded == [1.0, 1.0]  # without stop tokens, cut text is graded as text
    reward = EnvReward(stop_token_ids=[EOS, PAD])
    rewards, _ = call(reward, dataset, [text, text], ids)
    assert rewards == [1.0, 0.0] and reward.last[1].outcome is Outcome.TRUNCATED


def test_completions_in_either_of_trls_formats():
    assert completion_text("plain \\boxed{3}") == "plain \\boxed{3}"
    assert completion_text([{"role": "assistant", "content": "a"}]) == "a"
    parts = [{"type": "text", "text": "b"}, {"type": "image"}]
    assert completion_text([{"role": "assistant", "content": parts}]) == "b"
    assert completion_text([{"role": "assistant", "content": None}]) == ""


def test_a_dataset_without_the_task_column_is_one_line():
    with pytest.raises(AdapterError, match="the dataset has no 'rlvr_task' column to score with"):
        EnvReward()(prompts=["p"], completions=["c"], completion_ids=[[1]], answer=["3"])
