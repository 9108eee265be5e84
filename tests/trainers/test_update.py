"""The update phase of the loop on a real (random-init, tiny) Qwen2: gradient accumulation over
micro-batches gives the gradient of one big batch, for every aggregation mode and for PPO's
value loss; advantages land where they should (multi-turn: model tokens only)."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from rlvr.envs.episode import Episode
from rlvr.trainers.algorithms import get_algorithm
from rlvr.trainers.batch import collate
from rlvr.trainers.config import TrainConfig
from rlvr.trainers.model_set import Models
from rlvr.trainers.phases import (
    StepTensors,
    UpdateSums,
    accumulate_gradients,
    compute_advantages,
    old_and_ref_logprobs,
    update_is_on_policy,
)
from rlvr.trainers.policy import ValueHead
from rlvr.trainers.step_rollout import collect_groups, training_seeds
from rlvr.verifiers.verdict import Outcome
from tests.conftest import random_qwen2
from tests.tolerances import gradient_bound


@pytest.fixture(scope="module")
def model():
    return random_qwen2()


def make_episodes(n_groups=3, group_size=4, seed=0):
    """Groups with unequal completion lengths, multi-turn masks and mixed rewards."""
    g = torch.Generator().manual_seed(seed)
    episodes = []
    for group in range(n_groups):
        prompt = torch.randint(1, 64, (int(torch.randint(3, 9, (1,), generator=g)),), generator=g).tolist()
        for i in range(group_size):
            length = int(torch.randint(1, 10, (1,), generator=g))
            completion = torch.randint(1, 64, (length,), generator=g).tolist()
            mask = [1] * length
            if length > 4:  # an environment reply in the middle (multi-turn)
                mask[2:4] = [0, 0]
            reward = float((group + i) % 2)
            episodes.append(
                Episode(
                    "rlvr/Test-v0",
                    str(group),
                    group,
                    prompt,
                    completion,
                    mask,
                    [-1.0 * m for m in mask],
                    [reward],
                    Outcome.CORRECT if reward else Outcome.INCORRECT,
                    [],
                    "length" if length == 9 else "stop",
                )
            )
    return episodes


def gradients(models, algo, cfg, t, rows):
    for p in models.policy_parameters():
        p.grad = None
    accumulate_gradients(models, algo, cfg, t, rows, UpdateSums())
    return [p.grad.clone() for p in models.policy_parameters()]


@pytest.mark.parametrize("name", ["reinforce", "rloo", "grpo", "dr_grpo", "dapo", "ppo"])
def test_micro_batches_give_the_big_batch_gradient(model, name):
    algo = get_algorithm(name, constant_length=9) if name == "dr_grpo" else get_algorithm(name)
    policy = copy.deepcopy(model)
    models = Models(
        path=None,
        tokenizer=None,
        policy=policy,
        reference=copy.deepcopy(model).requires_grad_(False) if algo.needs_reference else None,
        value_head=ValueHead(32) if algo.needs_value_head else None,
    )
    if models.value_head is not None:
        torch.nn.init.normal_(models.value_head.linear.weight, std=0.1)
    batch = collate(make_episodes(), pad_token_id=0)
    # Two epochs: the old logprobs come from their own forward (one epoch would fuse it into the update's).
    cfg = TrainConfig(tasks_per_step=3, group_size=4, temperature=0.8, epochs=2)
    t = old_and_ref_logprobs(models, algo, cfg, batch)  # also the value head's old values
    assert t.old_logprobs_BT is not None
    assert (t.old_values_BT is not None) == models.wants_values
    t = t.with_advantages(compute_advantages(algo, t))
    with torch.no_grad():  # move the policy a little so ratios differ from 1 and clipping can act
        for p in policy.parameters():
            p.add_(0.05 * torch.randn_like(p))
    rows = torch.tensor([0, 3, 4, 7, 8, 11, 2, 9])  # a shuffled minibatch of 8 out of 12
    whole = gradients(models, algo, TrainConfig(tasks_per_step=3, group_size=4, temperature=0.8), t, rows)
    for micro in (1, 3):  # 3 does not divide 8: a ragged last micro-batch must be fine too
        cfg = TrainConfig(tasks_per_step=3, group_size=4, temperature=0.8, micro_batch_size=micro)
        parts = gradients(models, algo, cfg, t, rows)
        atol = gradient_bound(policy.config, int(batch.loss_mask[rows].sum()), *whole)  # other orders of sums
        for a, b in zip(whole, parts):
            torch.testing.assert_close(b, a, atol=atol, rtol=0)
    assert any(bool(g.abs().sum() > 0) for g in whole)


def test_gae_rewards_sit_on_the_last_model_token(model):
    """gamma = lambda = 1 and zero values: every model token's advantage is the episode reward;
    the environment's tokens (mask 0) get none."""
    algo = get_algorithm("ppo", lam=1.0, whiten_advantages=False, kl_coef=0.0)
    models = Models(path=None, tokenizer=None, policy=model, value_head=ValueHead(32))
    episodes = make_episodes(n_groups=2, group_size=3, seed=1)
    batch = collate(episodes, pad_token_id=0)
    t = old_and_ref_logprobs(models, algo, TrainConfig(), batch)
    t = dataclasses.replace(t, old_values_BT=torch.zeros_like(batch.loss_mask))
    adv = compute_advantages(algo, t)
    want = batch.rewards[:, None] * batch.loss_mask
    torch.testing.assert_close(adv.advantages, want)
    torch.testing.assert_close(adv.returns_BT, want)


def test_gae_credits_each_turn_with_its_own_and_later_rewards():
    """Turn rewards [0.5, 0.25], gamma = lambda = 1, V = 0: reward-to-go G_t = sum over t' >= t
    of r_t', so turn-2 tokens get 0.25 and turn-1 tokens 0.5 + 0.25 = 0.75 (not the episode's
    0.75 on every token, which credited turn 2 with turn 1's reward). Env tokens get nothing."""
    algo = get_algorithm("ppo", lam=1.0, whiten_advantages=False, kl_coef=0.0)
    ep = Episode(
        "rlvr/Test-v0",
        "0",
        0,
        [1, 2],
        [3, 4, 5, 6, 7, 8],
        [1, 1, 0, 0, 1, 1],
        [-1.0] * 6,
        [0.5, 0.25],
        Outcome.CORRECT,
        [],
        "stop",
    )
    batch = collate([ep], pad_token_id=0)
    t = StepTensors(batch=batch, old_logprobs_BT=torch.zeros(1, 6), old_values_BT=torch.zeros(1, 6))
    adv = compute_advantages(algo, t)
    want = torch.tensor([[0.75, 0.75, 0.0, 0.0, 0.25, 0.25]])
    torch.testing.assert_close(adv.advantages, want)
    torch.testing.assert_close(adv.returns_BT, want)
    assert t.advantages is None and t.returns_BT is None  # returned, not written into `t`
    # gamma 0.5 (lambda 1, V 0), env tokens spend no discount: turn 2's tokens 0.25 and
    # 0.5 * 0.25 = 0.125; turn 1's last 0.5 + 0.5 * 0.125 = 0.5625, its first 0.5 * 0.5625 = 0.28125.
    adv = compute_advantages(get_algorithm("ppo", gamma=0.5, lam=1.0, whiten_advantages=False, kl_coef=0.0), t)
    torch.testing.assert_close(adv.advantages, torch.tensor([[0.28125, 0.5625, 0.0, 0.0, 0.125, 0.25]]))


def test_dynamic_sampling_refills_the_batch():
    """Target 3 groups. Round 0 has rewards [1, 1], [0, 1], [0, 0]: one group with signal.
    Round 1 has [1, 0], [1, 1], [0, 1], [1, 0]: three more, of which the first two fill the batch.
    Rounds stop there (2 of at most 1 + 4); all 14 episodes are reported as sampled."""
    rounds = {0: [[1, 1], [0, 1], [0, 0]], 1: [[1, 0], [1, 1], [0, 1], [1, 0]], 2: [[0, 1]] * 3}

    def sample_round(r):
        return [[(r, i, x) for x in rewards] for i, rewards in enumerate(rounds[r])]

    def with_signal(groups):
        return [g for g in groups if len({x for _, _, x in g}) > 1]

    kept, every, n = collect_groups(sample_round, with_signal, target=3, max_extra_rounds=4)
    assert [(g[0][0], g[0][1]) for g in kept] == [(0, 1), (1, 0), (1, 2)]
    assert n == 2 and len(every) == 14
    # bounded: with no extra round allowed the batch stays short (1 group), in 1 round
    kept, every, n = collect_groups(sample_round, with_signal, target=3, max_extra_rounds=0)
    assert len(kept) == 1 and n == 1 and len(every) == 6


def test_sequence_advantages_and_gap(model):
    """GRPO advantages per group (worked: rewards [1, 0, 1, 0] -> +-0.866 with the sample std),
    and the sampler/trainer gap is measured on model tokens only."""
    algo = get_algorithm("grpo", kl_coef=0.0)
    models = Models(path=None, tokenizer=None, policy=model)
    episodes = make_episodes(n_groups=1, group_size=4, seed=2)
    batch = collate(episodes, pad_token_id=0)
    t = old_and_ref_logprobs(models, algo, TrainConfig(epochs=2), batch)
    t = t.with_advantages(compute_advantages(algo, t))
    # rewards [0, 1, 0, 1]: mean 0.5, sample std sqrt(1/3) -> +-0.5 / 0.57735 = +-0.8660
    torch.testing.assert_close(t.advantages, torch.tensor([-0.8660, 0.8660, -0.8660, 0.8660]), atol=1e-4, rtol=0)
    # sampler logprobs were -1 on model tokens: the gap is |trainer + 1| there and nothing elsewhere
    want = ((t.old_logprobs_BT + 1).abs() * batch.loss_mask).max()
    assert t.stats["logprob_gap_max"] == pytest.approx(float(want), abs=1e-6)


def test_training_seeds_are_reproducible_and_never_held_out():
    cfg = TrainConfig(tasks_per_step=4000, eval_tasks=500_000, eval_seed_start=1_000)
    seeds = training_seeds(cfg, step=3)
    assert seeds == training_seeds(cfg, step=3) and seeds != training_seeds(cfg, step=4)
    assert training_seeds(cfg, 3, refill=1) not in (seeds, training_seeds(cfg, 3, refill=2))
    assert not any(1_000 <= s < 501_000 for s in training_seeds(cfg, 3, refill=1))
    assert not any(1_000 <= s < 501_000 for s in seeds)
    assert min(seeds) >= 0 and max(seeds) < 2**31 - 1


def test_sampler_old_logprobs_weight_tokens_by_truncated_importance(model):
    """old_logprobs='sampler': each token's loss is weighted by min(pi_old / pi_sampler, cap);
    here the sampler said -1 on every model token, so the weight is min(exp(old + 1), 2)."""
    algo = get_algorithm("grpo", kl_coef=0.0)
    models = Models(path=None, tokenizer=None, policy=model)
    batch = collate(make_episodes(seed=3), pad_token_id=0)
    t = old_and_ref_logprobs(models, algo, TrainConfig(old_logprobs="sampler", tis_cap=2.0), batch)
    want = torch.clamp(torch.exp(t.old_logprobs_BT + 1.0), max=2.0) * batch.loss_mask
    torch.testing.assert_close(t.is_weights_BT, want)
    assert 0 < t.stats["is_weight_mean"] <= 2.0
    assert old_and_ref_logprobs(models, algo, TrainConfig(), batch).is_weights_BT is None


def test_masked_correction_takes_tokens_out_of_the_loss_mask(model):
    """rollout_correction='token_mask': a token whose ratio pi_old / pi_sampler leaves [1/c, c]
    leaves the loss mask (and so the denominators); the others keep their ratio as the weight.
    The mask that changes is the returned tensors' batch's: the batch passed in stays as it was."""
    algo = get_algorithm("grpo", kl_coef=0.0)
    models = Models(path=None, tokenizer=None, policy=model)
    collated = collate(make_episodes(seed=3), pad_token_id=0)
    old = old_and_ref_logprobs(models, algo, TrainConfig(epochs=2), collated).old_logprobs_BT
    shift = torch.zeros_like(old)
    shift[:, ::2] = 1.5  # the sampler was surer of every other token: ratio e^-1.5 = 0.22 < 1/2
    batch = dataclasses.replace(collated, sampler_logprobs=(old + shift) * collated.loss_mask)
    mask_before = batch.loss_mask.clone()
    cfg = TrainConfig(old_logprobs="sampler", rollout_correction="token_mask", tis_cap=2.0)
    t = old_and_ref_logprobs(models, algo, cfg, batch)
    keep = (mask_before > 0) & (shift == 0)
    assert bool(((mask_before > 0) & ~keep).any()) and bool(keep.any())
    torch.testing.assert_close(t.batch.loss_mask, keep.to(mask_before.dtype))
    assert torch.equal(batch.loss_mask, mask_before)  # not rewritten in place
    torch.testing.assert_close(t.is_weights_BT, keep.to(t.is_weights_BT.dtype), atol=1e-5, rtol=0)  # ratio 1 if kept
    masked = float(((mask_before > 0) & ~keep).sum() / mask_before.sum())
    assert t.stats["is_masked_frac"] == pytest.approx(masked)


def test_separate_critic_gets_value_gradients_only(model):
    """value_model='critic': the critic's own trunk learns the values; the policy's gradient is
    the policy loss's alone (no value loss flows into it)."""
    from rlvr.trainers.policy import Critic

    algo = get_algorithm("ppo", kl_coef=0.0)
    policy = copy.deepcopy(model)
    models = Models(path=None, tokenizer=None, policy=policy, critic=Critic(copy.deepcopy(model)))
    torch.nn.init.normal_(models.critic.head.linear.weight, std=0.1)
    batch = collate(make_episodes(), pad_token_id=0)
    cfg = TrainConfig(tasks_per_step=3, group_size=4)
    t = old_and_ref_logprobs(models, algo, cfg, batch)
    with torch.no_grad():
        t = dataclasses.replace(t, old_values_BT=models.critic(batch))
    t = t.with_advantages(compute_advantages(algo, t))
    rows = torch.arange(len(batch))
    with_critic = gradients(models, algo, cfg, t, rows)
    trunk = models.critic.model.get_decoder()
    assert all(p.grad is not None for p in [*trunk.parameters(), *models.critic.head.parameters()])
    alone = Models(path=None, tokenizer=None, policy=policy)  # the same policy, no values at all
    for a, b in zip(with_critic, gradients(alone, algo, cfg, t, rows)):
        torch.testing.assert_close(a, b)


def test_on_policy_update_is_only_when_nothing_changes_the_weights_first(model):
    """The separate old-logprob forward is skipped only for one epoch of one minibatch with
    recomputed old logprobs, no KL in the reward and no values."""
    plain = Models(path=None, tokenizer=None, policy=model)
    grpo, ppo = get_algorithm("grpo"), get_algorithm("ppo")
    assert update_is_on_policy(plain, grpo, TrainConfig(tasks_per_step=4, group_size=4))
    assert not update_is_on_policy(plain, grpo, TrainConfig(tasks_per_step=4, group_size=4, epochs=2))
    assert not update_is_on_policy(plain, grpo, TrainConfig(tasks_per_step=4, group_size=4, minibatch_size=8))
    assert not update_is_on_policy(plain, grpo, TrainConfig(tasks_per_step=4, group_size=4, old_logprobs="sampler"))
    assert not update_is_on_policy(plain, get_algorithm("reinforce", kl_placement="reward", kl_coef=0.1), TrainConfig())
    assert not update_is_on_policy(
        Models(path=None, tokenizer=None, policy=model, value_head=ValueHead(32)), ppo, TrainConfig(epochs=1)
    )


@pytest.mark.parametrize("name", ["grpo", "cispo", "gspo"])
def test_on_policy_update_equals_the_two_forward_update(model, name):
    """On-policy, the update's detached logprobs stand in for a separate no-grad forward: the
    same gradient, and the same gap, entropy and KL metrics."""
    algo = get_algorithm(name, kl_coef=0.05, kl_placement="loss")
    models = Models(
        path=None, tokenizer=None, policy=copy.deepcopy(model), reference=copy.deepcopy(model).requires_grad_(False)
    )
    with torch.no_grad():  # a reference that differs, so the KL is not 0
        for p in models.reference.parameters():
            p.add_(0.05 * torch.randn_like(p))
    batch = collate(make_episodes(), pad_token_id=0)
    rows = torch.tensor([5, 0, 11, 3, 8, 1, 10, 6, 2, 9, 4, 7])
    results = []
    for epochs in (1, 2):
        cfg = TrainConfig(tasks_per_step=3, group_size=4, micro_batch_size=5, epochs=epochs)
        t = old_and_ref_logprobs(models, algo, cfg, batch)
        assert (t.old_logprobs_BT is None) == (epochs == 1)
        t = t.with_advantages(compute_advantages(algo, t))
        for p in models.policy_parameters():
            p.grad = None
        sums = UpdateSums()
        accumulate_gradients(models, algo, cfg, t, rows, sums)
        stats = {**t.stats, **sums.pre.stats()}
        results.append(([p.grad.clone() for p in models.policy_parameters()], stats))
    (fused, fused_stats), (separate, separate_stats) = results
    atol = gradient_bound(models.policy.config, int(batch.loss_mask.sum()), *separate)  # tests.tolerances
    for a, b in zip(fused, separate):
        torch.testing.assert_close(a, b, atol=atol, rtol=0)
    for key in ("logprob_gap_max", "logprob_gap_mean", "entropy", "kl"):
        assert fused_stats[key] == pytest.approx(separate_stats[key], rel=1e-5, abs=1e-7), key
    assert fused_stats["kl"] > 0 and fused_stats["entropy"] > 0


def test_a_batch_is_not_changed_in_place():
    """A `Batch` is frozen: a phase derives a changed one (`dataclasses.replace`) and the one it
    was given stays as it was, whoever else holds it."""
    batch = collate(make_episodes(n_groups=1, group_size=2), pad_token_id=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        batch.loss_mask = torch.zeros_like(batch.loss_mask)  # type: ignore[misc]
    t = StepTensors(batch=batch, old_logprobs_BT=None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.advantages = torch.zeros(len(batch))  # type: ignore[misc]
