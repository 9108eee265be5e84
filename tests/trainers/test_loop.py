"""What the loop keeps out of a batch: `error` episodes (the grader failed, not the model) are
dropped and counted; DAPO's dynamic sampling drops groups without signal; a step with nothing
left trains on nothing but still logs. Real tiny model, Hugging Face sampler, and an
environment registered here whose grader fails on purpose for some tasks."""

from __future__ import annotations

import gymnasium as gym
import pytest

from rlvr.envs.core import ProceduralTasks, SingleTurnEnv, Task
from rlvr.trainers.config import TrainConfig
from rlvr.trainers.device import use_threads
from rlvr.trainers.loop import Trainer
from rlvr.verifiers.verdict import Outcome, Verdict
from tests.conftest import train_device

use_threads(1)  # as `rlvr train --threads 1` does: the Trainer leaves torch's threads to its caller

ENV_ID = "rlvrtest/FlakyGrader-v0"


class FlakyGraderEnv(ProceduralTasks, SingleTurnEnv):
    """Say "yes". Tasks with an even seed have a grader that crashes (outcome `error`); with
    `all_fail`, every grader does; with `constant`, every answer scores 1."""

    grade_truncated = True  # it grades any text, cut or not: the tiny model's samples often run to max_tokens

    def __init__(self, all_fail: bool = False, constant: bool = False, render_mode=None):
        super().__init__(render_mode=render_mode)
        self.all_fail, self.constant = all_fail, constant

    def make_task(self, seed: int) -> Task:
        return Task(str(seed), [{"role": "user", "content": f"Compute {seed % 10} + 1."}], "yes", "yes", "no")

    def verify(self, task: Task, response: str) -> Verdict:
        if self.all_fail or int(task.task_id) % 2 == 0:
            return Verdict(0.0, Outcome.ERROR, "grader crashed")
        if self.constant:
            return Verdict(1.0, Outcome.CORRECT)
        return Verdict(float(len(response) % 2), Outcome.CORRECT if len(response) % 2 else Outcome.INCORRECT)


@pytest.fixture(scope="module", autouse=True)
def registered():
    gym.register(ENV_ID, entry_point=FlakyGraderEnv)
    yield
    gym.registry.pop(ENV_ID, None)


def trainer(tmp_path, **settings) -> Trainer:
    base = dict(
        device=train_device(),
        model="tiny",
        sampler="hf",
        env=ENV_ID,
        tasks_per_step=6,
        group_size=4,
        max_tokens=8,
        threads=1,
        progress=False,
        out=str(tmp_path),
        steps=3,
    )
    return Trainer(TrainConfig.from_dict({**base, **settings}))


def test_error_episodes_are_dropped_and_counted(tmp_path):
    t = trainer(tmp_path)
    rollout = t.rollout(0)
    errors = [ep for ep in rollout.all_episodes if ep.is_error]
    assert 0 < len(errors) < len(rollout.all_episodes)
    assert not any(ep.is_error for ep in rollout.episodes)
    metrics = t.train_step()
    assert metrics["errors"] == len(errors)
    assert metrics["episodes_trained"] == metrics["episodes"] - metrics["errors"]
    assert metrics["optimizer_steps"] == 1


def test_a_step_with_nothing_to_train_on_is_skipped(tmp_path):
    t = trainer(tmp_path, env_args={"all_fail": True})
    before = [p.detach().clone() for p in t.policy.parameters()]
    metrics = t.train_step()
    assert metrics["skipped"] == 1 and metrics["errors"] == metrics["episodes"] == 24
    assert all((a == p).all() for a, p in zip(before, t.policy.parameters()))


def test_dynamic_sampling_drops_groups_without_signal(tmp_path):
    t = trainer(tmp_path, algo="dapo", env_args={"constant": True})  # every valid answer scores 1
    metrics = t.train_step()
    assert metrics["groups_kept"] == 0 and metrics["skipped"] == 1
    assert metrics["groups_total"] == 6
