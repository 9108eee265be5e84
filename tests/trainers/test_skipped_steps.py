"""Steps that train on nothing never crash the run, and the staleness metrics stay true: the policy
version is the number of updates the sampler received, not the step number. Two real cases with
the real in-process vLLM sampler, synchronous (max_staleness 0) and asynchronous (1): a grader
down for the first steps (every episode an `error`), and DAPO whose groups have no reward variance
for the first steps (every group filtered), then learnable ones."""

from __future__ import annotations

import json

import pytest

from rlvr.trainers.loop import Trainer
from tests.trainers.test_train_async import config

pytestmark = pytest.mark.vllm


def train(out, **overrides) -> tuple[Trainer, list[dict]]:
    """A short vLLM run (test_train_async's settings, 2 tasks x 2 samples a step)."""
    trainer = Trainer(config(out, **{"tasks_per_step": 2, "group_size": 2, **overrides}))
    try:
        trainer.train()
    finally:
        trainer.close()
    return trainer, [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]


def assert_versions_true(trainer: Trainer, records: list[dict], k: int) -> None:
    trained = [r for r in records if not r.get("skipped")]
    assert trained, "no step trained"
    assert trainer.version == len(trained)  # one update per step that trained, none for the others
    if k == 0:  # the sampler holds the last update's weights (asynchronously, the last may be staged, unloaded)
        assert trainer.sampler.version == trainer.version
    for r in trained:
        assert 0 <= r["staleness_max"] <= k
        assert sum(r[f"staleness_{lag}_frac"] for lag in range(k + 1)) == pytest.approx(1.0)
        if k == 0:
            assert r["staleness_0_frac"] == 1.0


@pytest.mark.parametrize("k", [0, 1])
def test_a_grader_outage_skips_its_steps_and_training_goes_on(tmp_path, k):
    # 2 tasks x 2 samples = 4 verifications a step: the first two steps are all errors
    trainer, records = train(
        tmp_path,
        max_staleness=k,
        env="run_test_envs:test/GraderOutage-v0",
        env_args={"outage": 8, "key": f"outage-{k}"},
        skip_zero_signal=False,  # this is about error steps: a 2 x 2 step without reward variance still trains
    )
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    assert [r.get("skipped", 0) for r in records] == [1, 1, 0, 0]
    assert [r["errors"] for r in records[:2]] == [4, 4] and records[2]["errors"] == 0
    assert_versions_true(trainer, records, k)


@pytest.mark.parametrize("k", [0, 1])
def test_dapo_with_every_group_filtered_then_learnable_groups(tmp_path, k):
    # 2 rounds (one refill) of 2 tasks x 4 samples = 16 verifications a filtered step: two of them
    trainer, records = train(
        tmp_path,
        max_staleness=k,
        algo="dapo",
        group_size=4,
        steps=5,
        algo_args={"max_refill_rounds": 1, "overlong_filtering": False},
        env="run_test_envs:test/FlatThenLearnable-v0",
        env_args={"flat": 32, "key": f"dapo-{k}"},
    )
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5]
    assert [r.get("skipped", 0) for r in records[:2]] == [1, 1]
    assert all(r["groups_kept"] == 0 and r["sampling_rounds"] == 2 for r in records[:2])
    assert_versions_true(trainer, records, k)
