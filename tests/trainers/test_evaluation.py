"""trainers/evaluation.py: the chunk-seed rule, the held-out tasks and results, and what an
evaluation of errors alone means."""

from __future__ import annotations

import pytest

from rlvr.envs.episode import Episode
from rlvr.envs.eval_tasks import EvalTasks
from rlvr.envs.sampler import SamplingSettings
from rlvr.trainers.evaluation import check_held_out, chunk_sampling, held_out_results, held_out_tasks
from rlvr.trainers.outage import NothingProduced
from rlvr.verifiers.verdict import Outcome


def episode(outcome: Outcome, reward: float = 0.0, detail: str = "") -> Episode:
    return Episode(
        env_id="e",
        task_id="0",
        group_id=0,
        prompt_ids=[1],
        completion_ids=[2],
        loss_mask=[1],
        logprobs=[0.0],
        turn_rewards=[reward],
        outcome=outcome,
        messages=[],
        finish_reason=None,
        metadata={"detail": detail},
    )


def test_a_tasks_seed_does_not_depend_on_its_chunk():
    # seed 100, G = 4: the chunk starting at task 6 starts at seed 124, so task 7 (its second) gets
    # 124 + 4 = 128 = 100 + 7 * 4, as in a run whose chunk starts at task 0
    sampling = SamplingSettings(temperature=1.0, top_p=1.0, max_tokens=8, seed=100)
    assert chunk_sampling(sampling, 6, 4).seed == 124
    assert chunk_sampling(sampling, 0, 4) == sampling
    assert chunk_sampling(sampling, 6, 4).temperature == 1.0


def test_held_out_tasks_by_seed_and_by_row():
    assert held_out_tasks(EvalTasks(count=5, start=1000), 3) == ({"seeds": [1000, 1001, 1002]}, 3)
    assert held_out_tasks(EvalTasks(count=2, start=1000), None) == ({"seeds": [1000, 1001]}, 2)
    listed = EvalTasks(count=3, start=0, problems=("a", "b", "c", "d"))
    tasks, n = held_out_tasks(listed, 10)  # at most the split's rows
    assert n == 3 and tasks["task_ids"] == ["a", "b", "c"]


def test_held_out_results_count_errors_apart():
    every = [episode(Outcome.CORRECT, 1.0), episode(Outcome.INCORRECT, 0.0), episode(Outcome.ERROR, 0.0)]
    results = held_out_results(every, {"task_ids": ["a", "b", "c"]}, 3)
    assert results == {"accuracy": 0.5, "reward_mean": 0.5, "tasks": 3, "errors": 1, "task_ids": ["a", "b", "c"]}
    assert check_held_out(results, 0) is None


def test_an_evaluation_of_errors_alone_stops_before_training_and_warns_after():
    results = held_out_results([episode(Outcome.ERROR, detail="grader down")] * 2, {"seeds": [1, 2]}, 2)
    assert results["first_error"] == "grader down" and results["errors"] == 2
    with pytest.raises(NothingProduced, match="at step 0: every one of its 2 episodes was an error"):
        check_held_out(results, 0)
    assert check_held_out(results, 5).startswith("warning: the held-out evaluation at step 5")
