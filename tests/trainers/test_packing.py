"""Padding-free micro-batches (`--micro-batch-tokens`): the packing assignment and the flat layout
by hand; on real tiny-model episodes of mixed lengths (Hugging Face sampler, Arithmetic), packed
forwards give the padded logprobs, entropy and values, the loss's gradients equal the padded
path's, and no token of one packed sequence sees another; a short training run completes."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from rlvr.envs.episode import Episode
from rlvr.trainers.algorithms import get_algorithm
from rlvr.trainers.batch import collate
from rlvr.trainers.config import ConfigError, TrainConfig
from rlvr.trainers.device import model_device, use_threads
from rlvr.trainers.loop import Trainer
from rlvr.trainers.model_set import Models
from rlvr.trainers.packing import PackingError, micro_batch, pack, packed_layout, split_rows
from rlvr.trainers.phases import (
    UpdateSums,
    accumulate_gradients,
    compute_advantages,
    old_and_ref_logprobs,
    per_micro_batch,
)
from rlvr.trainers.policy import Critic, ValueHead, forward
from rlvr.verifiers.verdict import Outcome
from tests.conftest import train_device
from tests.tolerances import forward_bound, gradient_bound

use_threads(1)  # as `rlvr train --threads 1` does: the Trainer leaves torch's threads to its caller

BUDGET = 64  # tokens per packed forward: many bins for the episodes below, and rows longer than it


def test_first_fit_decreasing_worked_example():
    # longest first: 12 -> bin A (over budget: alone), 9 -> B (room 1), 5 -> C (room 5),
    # 4 -> C (room 1), 3 -> D (room 7), 2 -> D (no room in B or C)
    assert pack([5, 3, 9, 2, 4, 12], 10) == [[5], [2], [0, 4], [1, 3]]
    assert pack([4, 4, 4], 8) == [[0, 1], [2]]  # ties keep their order
    assert pack([], 8) == []
    with pytest.raises(PackingError, match=">= 1"):
        pack([3], 0)


def episode(prompt, completion, mask=None, group=0):
    mask = mask or [1] * len(completion)
    return Episode(
        "rlvr/Test-v0",
        str(group),
        group,
        prompt,
        completion,
        mask,
        [-1.0] * len(completion),
        [1.0],
        Outcome.CORRECT,
        [],
        "stop",
    )


def test_layout_worked_example():
    batch = collate([episode([1, 2], [3, 4, 5]), episode([6], [7]), episode([8, 9], [10, 11], [1, 0])], 0)
    layout = packed_layout(batch)
    assert layout.input_ids.tolist() == [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]]
    assert layout.position_ids.tolist() == [[0, 1, 2, 3, 4, 0, 1, 0, 1, 2, 3]]  # restarts at every row
    assert layout.targets.tolist() == [3, 4, 5, 7, 10, 11]
    assert layout.predictors.tolist() == [1, 2, 3, 5, 8, 9]  # the previous token of the same row
    assert layout.rows.tolist() == [0, 0, 0, 1, 2, 2] and layout.cols.tolist() == [0, 1, 2, 0, 0, 1]
    assert layout.unpack(torch.arange(1.0, 7.0)).tolist() == [[1, 2, 3], [4, 0, 0], [5, 6, 0]]
    rows = torch.arange(3)
    assert [r.tolist() for r in split_rows(batch, rows, 2, None)] == [[0, 1], [2]]
    assert [r.tolist() for r in split_rows(batch, rows, 2, 6)] == [[0], [1, 2]]  # real lengths 5, 2, 4


def test_micro_batch_size_and_tokens_are_exclusive():
    with pytest.raises(ConfigError, match="not both"):
        TrainConfig(micro_batch_size=4, micro_batch_tokens=256).validate()
    TrainConfig(micro_batch_tokens=256).validate()
    with pytest.raises(ConfigError, match=">= 1"):
        TrainConfig(micro_batch_tokens=0).validate()


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """Episodes the tiny model sampled (HF sampler, Arithmetic; hot, for lengths from 6 to 40) and the model."""
    cfg = TrainConfig.from_dict(
        dict(
            model="tiny",
            sampler="hf",
            env="rlvr/Arithmetic-v0",
            tasks_per_step=4,
            group_size=4,
            max_tokens=40,
            threads=1,
            progress=False,
            steps=1,
            temperature=2.5,
            device=train_device(),  # on the device the suite follows; outputs compared on the CPU
            out=str(tmp_path_factory.mktemp("run")),
        )
    )
    trainer = Trainer(cfg)
    episodes = trainer.rollout(0).episodes
    batch = collate(episodes, trainer.models.pad_token_id)
    lengths = batch.attention_mask.sum(1)
    assert len(set(lengths.tolist())) > 3, "want episodes of mixed lengths"
    assert len(split_rows(batch, torch.arange(len(batch)), len(batch), BUDGET)) > 2
    return trainer.models.policy, batch


def masked_diff(a, b, mask):
    return float(((a - b) * mask).abs().max())


def bound(model, *tensors) -> float:
    """float32 rounding of the model's forward, at the size of the values compared (tests.tolerances)."""
    return forward_bound(model.config, *tensors)


def test_packed_forward_equals_padded(real):
    model, batch = real
    head = ValueHead(model.config.hidden_size).to(model_device(model))
    torch.nn.init.normal_(head.linear.weight, std=0.1)
    with torch.no_grad():
        padded = forward(model, batch, 0.7, with_entropy=True, value_head=head)
        fn = lambda mb: (lambda o: (o.logprobs, o.entropy, o.values))(  # noqa: E731
            forward(model, mb, 0.7, with_entropy=True, value_head=head)
        )
        packed = per_micro_batch(batch, len(batch), fn, tokens=BUDGET)
        whole = forward(model, micro_batch(batch, torch.arange(len(batch)), True), 0.7)  # all in one sequence
    mask = batch.loss_mask
    for name, a, b in zip(("logprobs", "entropy", "values"), (padded.logprobs, padded.entropy, padded.values), packed):
        print(f"packed vs padded {name}: {masked_diff(a, b, mask):.3g} (bound {bound(model, a):.3g})")
        assert masked_diff(a, b, mask) < bound(model, a), name
    assert masked_diff(padded.logprobs, whole.logprobs, mask) < bound(model, padded.logprobs)
    assert float(padded.logprobs.abs().mul(mask).sum()) > 0
    # padding-free also under the eager attention (the mask is built differently there)
    eager = copy.deepcopy(model)
    eager.set_attn_implementation("eager")
    with torch.no_grad():
        (eager_lp,) = per_micro_batch(batch, len(batch), lambda mb: (forward(eager, mb, 0.7).logprobs,), BUDGET)
        eager_padded = forward(eager, batch, 0.7).logprobs  # eager vs sdpa kernels differ by ~2e-5 on their own
    assert masked_diff(eager_padded, eager_lp, mask) < bound(model, eager_padded)


def test_critic_values_packed_equal_padded(real):
    model, batch = real
    critic = Critic(copy.deepcopy(model))
    torch.nn.init.normal_(critic.head.linear.weight, std=0.1)
    with torch.no_grad():
        padded = critic(batch)
        (packed,) = per_micro_batch(batch, len(batch), lambda mb: (critic(mb),), tokens=BUDGET)
    assert masked_diff(padded, packed, batch.loss_mask) < bound(model, padded)


def grads(models, algo, cfg, t, rows):
    for p in models.policy_parameters():
        p.grad = None
    accumulate_gradients(models, algo, cfg, t, rows, UpdateSums())
    return [p.grad.clone() for p in models.policy_parameters()]


def with_mixed_rewards(batch):
    """The sampled batch with rewards 0, 0.5, 1, 0, ... (the hot tiny model solves nothing, and
    equal rewards would leave GRPO no advantage), also as each row's last-token turn reward (GAE)."""
    rewards_B = (torch.arange(len(batch)) % 3) / 2.0
    last_B = (batch.loss_mask > 0).cumsum(1).argmax(1)  # the last model token of each row
    turn_rewards_BT = torch.zeros_like(batch.loss_mask)
    turn_rewards_BT[torch.arange(len(batch)), last_B] = rewards_B
    return dataclasses.replace(batch, rewards=rewards_B, turn_rewards=turn_rewards_BT)


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("name", ["grpo", "ppo"])
def test_packed_gradients_equal_padded(real, name, attention):
    """The same loss gradient with and without padding, to float32 rounding (tests.tolerances:
    one term per token in the backward, through the model's layers; ~3e-5 at gradients of ~1);
    PPO also carries the value head's loss through the packed forward. Measured on Intel Xeon:
    with sdpa the packed pass runs other kernel shapes (one long masked sequence) and differs by up
    to ~9e-6 (sdpa against eager on the same padded batch by ~2e-5); with eager attention ~2e-7."""
    model, batch = real
    batch = with_mixed_rewards(batch)
    algo = get_algorithm(name)
    g = torch.Generator().manual_seed(0)
    policy = copy.deepcopy(model)
    policy.set_attn_implementation(attention)
    models = Models(
        path=None,
        tokenizer=None,
        policy=policy,
        reference=copy.deepcopy(model).requires_grad_(False) if algo.needs_reference else None,
        value_head=ValueHead(model.config.hidden_size) if algo.needs_value_head else None,
    )
    if models.value_head is not None:  # drawn on the CPU (the generator's), then moved to the model
        torch.nn.init.normal_(models.value_head.linear.weight, std=0.1, generator=g)
        models.value_head.to(model_device(model))
    base = dict(tasks_per_step=4, group_size=4, temperature=0.7, epochs=2, device=str(model_device(model)))
    t = old_and_ref_logprobs(models, algo, TrainConfig(**base), batch)
    t = t.with_advantages(compute_advantages(algo, t))
    with torch.no_grad():  # ratios a little away from 1 (more, and PPO's unbounded ratio on A < 0 blows gradients up)
        for p in models.policy.parameters():
            p.add_(0.001 * torch.randn(p.shape, generator=g).to(p.device))
    rows = torch.randperm(len(batch), generator=g)
    padded = grads(models, algo, TrainConfig(**base, micro_batch_size=4), t, rows)
    packed = grads(models, algo, TrainConfig(**base, micro_batch_tokens=BUDGET), t, rows)
    whole = grads(models, algo, TrainConfig(**base), t, rows)  # padded, one micro-batch: the float32 noise floor
    worst = max(float((a - b).abs().max()) for a, b in zip(padded, packed))
    floor = max(float((a - b).abs().max()) for a, b in zip(padded, whole))
    tolerance = gradient_bound(model.config, int(batch.loss_mask.sum()), *padded)
    message = f"packed vs padded {worst:.2e}, bound {tolerance:.2e} (padded 4 vs 16 rows per micro-batch: {floor:.2e})"
    print(f"{name} {attention} gradients: {message}")
    assert worst < tolerance, message
    assert max(float(x.abs().max()) for x in padded) > 0.1  # a real gradient, not two zeros


def test_no_leakage_between_packed_sequences(real):
    model, batch = real
    rows = torch.arange(len(batch))
    mb = micro_batch(batch, rows, True)
    changed = copy.deepcopy(mb)
    victim = 3
    real_cols = changed.attention_mask[victim].bool()
    changed.input_ids[victim, real_cols] = (changed.input_ids[victim, real_cols] * 7 + 5) % model.config.vocab_size
    with torch.no_grad():
        before, after = forward(model, mb, 1.0).logprobs, forward(model, changed, 1.0).logprobs
    others = rows != victim
    assert torch.equal(before[others], after[others])  # bit for bit: nothing of row 3 reaches them
    assert not torch.equal(before[victim], after[victim])


def test_short_train_run_with_micro_batch_tokens(tmp_path):
    """PPO with a separate critic: old values, old logprobs and the update all run packed."""
    cfg = TrainConfig.from_dict(
        dict(
            model="tiny",
            sampler="hf",
            env="rlvr/Arithmetic-v0",
            tasks_per_step=4,
            group_size=2,
            max_tokens=24,
            threads=1,
            progress=False,
            steps=2,
            algo="ppo",
            value_model="critic",
            micro_batch_tokens=64,
            device=train_device(),
            out=str(tmp_path),
        )
    )
    trainer = Trainer(cfg)
    for _ in range(2):
        metrics = trainer.train_step()
        assert metrics["optimizer_steps"] >= 1
        assert all(torch.isfinite(torch.tensor(float(metrics[k]))) for k in ("policy_loss", "value_loss", "grad_norm"))
