"""The loop with the real in-process vLLM sampler: after every sync the sampler's logprobs equal
the trainer's on the step's tokens (float32: gap < 1e-4), the metrics are all there, and the gap
measurement does catch a sampler that was not synced."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from rlvr.trainers.config import TrainConfig
from rlvr.trainers.loop import Trainer
from rlvr.trainers.weight_sync import WeightSyncError
from tests.conftest import require, train_device

pytestmark = pytest.mark.vllm
GAP = 1e-4
METRICS = (
    "reward_mean",
    "reward_std",
    "pass_rate",
    "kl",
    "entropy",
    "clip_frac",
    "grad_norm",
    "response_length",
    "logprob_gap_max",
    "logprob_gap_mean",
    "time_sampling",
    "time_scoring",
    "time_training",
    "time_syncing",
    "tokens_per_second",
    "errors",
)


@pytest.fixture(scope="module")
def trainer(tmp_path_factory):
    require(importlib.util.find_spec("vllm") is not None, "vllm is not installed")
    config = TrainConfig.from_dict(
        dict(
            device=train_device(),
            model="tiny",
            sampler="vllm",
            algo="grpo",
            tasks_per_step=8,
            group_size=4,
            max_tokens=12,
            lr=2e-3,
            threads=1,
            progress=False,
            out=str(tmp_path_factory.mktemp("run")),
            steps=10,
        )
    )
    trainer = Trainer(config)
    yield trainer
    trainer.close()  # its engine, now rather than at exit


def test_every_sync_leaves_sampler_and_trainer_equal(trainer):
    before = {n: p.detach().clone() for n, p in trainer.policy.named_parameters()}
    for _ in range(3):
        metrics = trainer.train_step()
        trainer.step += 1
        assert set(METRICS) <= set(metrics)
        assert metrics["logprob_gap_max"] < GAP, metrics["logprob_gap_max"]
        assert metrics["logprob_gap_mean"] < GAP / 10
        assert metrics["time_syncing"] > 0 and metrics["tokens_per_second"] > 0
    moved = max(float((p.detach() - before[n]).abs().max()) for n, p in trainer.policy.named_parameters())
    assert moved > 1e-4  # the syncs carried real changes (about lr per Adam step), and vLLM followed them


def test_the_gap_catches_a_stale_sampler(trainer):
    with torch.no_grad():  # change the policy behind the sampler's back (no sync)
        for p in trainer.policy.parameters():
            p.add_(0.02 * torch.randn_like(p))
    with pytest.raises(WeightSyncError) as caught:  # the step stops before its optimizer step
        trainer.train_step()
    assert caught.value.gap > 100 * GAP
    trainer.sync(trainer.version)  # a sync puts it right
    assert trainer.train_step()["logprob_gap_max"] < GAP


def test_resume_puts_the_checkpoint_into_vllm(tmp_path, capsys):
    """`--resume` starts vLLM from the checkpoint directory (a Hugging Face directory vLLM loads
    as it is), so the first resumed step's sampler logprobs are the trained weights'. Both runs are
    `rlvr train` through its entry point in this process (each closes its engine when it ends)."""
    require(importlib.util.find_spec("vllm") is not None, "vllm is not installed")
    from tests.trainers.test_learning import rlvr_train

    base = [
        "train",
        "--device",
        train_device(),
        "--out",
        str(tmp_path),
        "--no-progress",
        "--threads",
        "1",
        "--tasks-per-step",
        "8",
        "--group-size",
        "4",
        "--max-tokens",
        "12",
        "--lr",
        "2e-3",
        "--warmup-steps",
        "0",
    ]
    for extra in (["--steps", "2"], ["--steps", "3", "--resume"]):
        rlvr_train(base + extra, capsys)
    records = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3]
    assert all(r["logprob_gap_max"] < GAP for r in records)
