"""Algorithm presets: the papers' settings, validation, and one full loss per preset."""

import dataclasses
import warnings
from types import MappingProxyType

import pytest
import torch

from rlvr.trainers import algorithms
from rlvr.trainers.algorithms import PRESETS, AlgoConfig, Estimator, get_algorithm, preset_help, resolve
from rlvr.trainers.config import ConfigError, TrainConfig
from rlvr.trainers.dispatch import (
    compute_policy_loss,
    filter_loss_mask,
    keep_groups,
    sequence_advantages,
    shape_rewards,
    teacher_advantages,
)
from rlvr.trainers.kernels.advantages import gae
from rlvr.trainers.kernels.aggregation import aggregate_loss
from rlvr.trainers.preflight import check_run, check_settings
from rlvr.trainers.zero_signal import no_signal

NAMES = ["reinforce", "rloo", "grpo", "dr_grpo", "dapo", "gspo", "cispo", "ppo", "distill"]


def test_all_named_presets_exist_and_are_frozen():
    assert sorted(PRESETS) == sorted(NAMES)
    cfg = get_algorithm("grpo")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.kl_coef = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        PRESETS["mine"] = cfg  # type: ignore[index]


def test_presets_follow_the_papers():
    dapo = get_algorithm("dapo")
    assert (dapo.clip_eps_low, dapo.clip_eps_high, dapo.aggregation) == (0.2, 0.28, "token_mean")
    assert dapo.dynamic_sampling and dapo.overlong_filtering and dapo.kl_coef == 0
    assert dapo.max_refill_rounds > 0 and dapo.overlong_buffer_frac == 0.2
    dr = get_algorithm("dr_grpo")
    assert not dr.scale_by_std and dr.aggregation == "seq_mean_token_sum_norm"
    grpo = get_algorithm("grpo")
    assert grpo.scale_by_std and grpo.kl_in_loss and grpo.kl_estimator == "k3"
    gspo = get_algorithm("gspo")
    assert gspo.ratio_level == "sequence" and (gspo.clip_eps_low, gspo.clip_eps_high) == (3e-4, 4e-4)
    assert get_algorithm("cispo").loss_type == "cispo"
    ppo = get_algorithm("ppo")
    assert ppo.needs_value_head and ppo.advantage == "gae" and ppo.value_clip == 0.2
    assert ppo.kl_in_reward and not ppo.kl_in_loss and ppo.ppo_epochs > 1
    assert get_algorithm("reinforce").loss_type == "pg"
    assert get_algorithm("rloo").advantage == "rloo"
    assert get_algorithm("rloo").aggregation == "seq_mean_token_sum"  # one action: the summed log-prob
    assert [n for n in NAMES if get_algorithm(n).needs_value_head] == ["ppo"]


def test_get_algorithm_errors_list_known_names_and_fields():
    with pytest.raises(ValueError, match="known: cispo, dapo, distill, dr_grpo, grpo, gspo, ppo, reinforce, rloo"):
        get_algorithm("trpo")
    with pytest.raises(ValueError, match="unknown AlgoConfig field.*clip_eps"):
        get_algorithm("grpo", clip_epsilon=0.3)
    assert get_algorithm("Dr-GRPO").name == "dr_grpo"
    assert get_algorithm("dapo", kl_coef=0.01).kl_in_loss


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"advantage": "vtrace"}, "advantage"),
        ({"aggregation": "mean"}, "aggregation"),
        ({"clip_eps_low": -0.1}, "clip_eps_low"),
        ({"clip_eps_high": float("nan")}, "clip_eps_high"),
        ({"dual_clip": 0.9}, "dual_clip"),
        ({"gamma": 1.5}, "gamma"),
        ({"kl_estimator": "k4"}, "kl_estimator"),
        ({"kl_placement": "both"}, "kl_placement"),
        ({"ppo_epochs": 0}, "ppo_epochs"),
        ({"constant_length": -5}, "constant_length"),
        ({"value_clip": 0.0}, "value_clip"),
        ({"ratio_level": "sequence", "loss_type": "cispo"}, "sequence"),
        ({"loss_type": "pg", "ppo_epochs": 2}, "on-policy"),
        ({"dynamic_sampling": "yes"}, "bool"),
        ({"max_refill_rounds": -1}, "max_refill_rounds"),
        ({"overlong_buffer_frac": 1.5}, "overlong_buffer_frac"),
        ({"overlong_max_length": 0}, "overlong_max_length"),
    ],
)
def test_validation_rejects_bad_configs(bad, match):
    with pytest.raises(ValueError, match=match):
        AlgoConfig(**bad)


@pytest.mark.parametrize("name", NAMES)
def test_each_preset_runs_end_to_end_with_finite_gradient(name):
    # Two groups of G=3 on a tiny (B, T, V) policy; one full step of the preset's maths.
    cfg = get_algorithm(name, constant_length=4)
    g = torch.Generator().manual_seed(0)
    B, T, V = 6, 4, 7
    logits = torch.randn(B, T, V, generator=g, dtype=torch.float64, requires_grad=True)
    actions = torch.randint(0, V, (B, T), generator=g)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]] * 2)
    lp = torch.log_softmax(logits, -1).gather(-1, actions[..., None]).squeeze(-1)
    rewards = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]])
    if cfg.needs_value_head:
        token_r = torch.zeros(B, T, dtype=torch.float64)
        last = mask.sum(-1) - 1
        token_r[torch.arange(B), last] = rewards.reshape(-1).double()
        adv, _ = gae(token_r, torch.full((B, T), 0.5, dtype=torch.float64), mask, cfg.gamma, cfg.lam)
    elif cfg.needs_teacher:  # distill: the reference is the teacher, the advantage teacher - student
        adv = teacher_advantages(cfg, lp.detach(), (lp - 0.3 * actions).detach(), mask)
    else:
        adv = sequence_advantages(cfg, rewards).double()
    ref = (lp - 0.1).detach()
    out = compute_policy_loss(cfg, lp, lp.detach(), adv, mask, ref_logprobs_BT=ref)
    loss = aggregate_loss(out.loss, mask, cfg.aggregation, constant_length=cfg.constant_length)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logits.grad).all()
    assert logits.grad.abs().sum() > 0
    assert not out.clipped.any()  # ratio 1 on the first epoch: nothing clipped


def test_rloo_preset_scores_the_whole_completion_as_one_action():
    # One group, rewards [1, 0] -> RLOO advantages [+1, -1]; lengths 3 and 1. The loss is the
    # summed sequence log-prob times -A, averaged over the 2 sequences, so at ratio 1 every token
    # of row 0 gets d loss / d logp = -1/2 and row 1's token +1/2, whatever the length (with the
    # length-normalised option, row 0's tokens would get -1/6).
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    for aggregation, row0 in (("seq_mean_token_sum", -0.5), ("seq_mean_token_mean", -1 / 6)):
        algo = get_algorithm("rloo", kl_coef=0.0, aggregation=aggregation)
        adv = sequence_advantages(algo, torch.tensor([[1.0, 0.0]]))
        assert adv.tolist() == [1.0, -1.0]
        lp = torch.full((2, 3), -1.0, dtype=torch.float64, requires_grad=True)
        out = compute_policy_loss(algo, lp, lp.detach(), adv, mask)
        aggregate_loss(out.loss, mask, algo.aggregation).backward()
        assert torch.allclose(lp.grad, torch.tensor([[row0] * 3, [0.5, 0, 0]], dtype=torch.float64))


def test_reinforce_refuses_stale_samples():
    # loss 'pg' has no ratio or clip: a second epoch or minibatch would push -A grad log pi on
    # samples of an older policy. The clipped loss may reuse them.
    reinforce = get_algorithm("reinforce")
    check_settings(reinforce, TrainConfig(tasks_per_step=4, group_size=2))
    with pytest.raises(ConfigError, match="epochs 1 .* got epochs 3"):
        check_settings(reinforce, TrainConfig(tasks_per_step=4, group_size=2, epochs=3))
    with pytest.raises(ConfigError, match="minibatch_size"):
        check_settings(reinforce, TrainConfig(tasks_per_step=4, group_size=2, minibatch_size=4))
    check_settings(get_algorithm("reinforce", loss_type="clipped"), TrainConfig(epochs=3))


def test_sampler_old_logprobs_refuse_top_p():
    check_settings(get_algorithm("grpo"), TrainConfig(old_logprobs="sampler"))
    check_settings(get_algorithm("grpo"), TrainConfig(top_p=0.9))
    with pytest.raises(ConfigError, match="top_p"):
        check_settings(get_algorithm("grpo"), TrainConfig(old_logprobs="sampler", top_p=0.9))


def test_k1_in_the_loss_warns_and_k1_in_the_reward_does_not():
    with pytest.warns(UserWarning, match="zero expected gradient"):
        get_algorithm("grpo", kl_estimator="k1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        get_algorithm("rloo")  # k1 in the reward: fine
        get_algorithm("grpo", kl_estimator="k1", kl_coef=0.0)  # no KL at all


def test_resolve_fills_lengths_from_the_generation_budget():
    assert resolve(get_algorithm("dr_grpo"), max_tokens=64).constant_length == 64
    assert resolve(get_algorithm("dr_grpo", constant_length=8), max_tokens=64).constant_length == 8
    assert resolve(get_algorithm("dapo"), max_tokens=64).overlong_max_length == 64
    assert resolve(get_algorithm("grpo"), max_tokens=64) == get_algorithm("grpo")


def test_dapo_soft_overlong_penalty_per_turn():
    # L_max 10, buffer 0.2 * 10 = 2: free up to 8 tokens, then -(len - 8)/2.
    # Row 0: one turn of 9 tokens, reward 1 -> 1 - 0.5 = 0.5 on its last token (column 8).
    # Row 1: turn 1 of 10 tokens (reward 0, penalty -1 on column 9), 2 env tokens, turn 2 of
    # 4 tokens (reward 1, no penalty, column 15): total 1 - 1 = 0.
    algo = resolve(get_algorithm("dapo"), max_tokens=10)
    mask = torch.tensor([[1] * 9 + [0] * 7, [1] * 10 + [0, 0] + [1] * 4])
    turn_rewards = torch.zeros(2, 16)
    turn_rewards[0, 8], turn_rewards[1, 15] = 1.0, 1.0
    rewards, shaped = shape_rewards(algo, torch.tensor([1.0, 1.0]), turn_rewards, mask)
    assert rewards.tolist() == [0.5, 0.0]
    want = torch.zeros(2, 16)
    want[0, 8], want[1, 9], want[1, 15] = 0.5, -1.0, 1.0
    assert torch.equal(shaped, want)
    # other presets leave rewards alone
    same = shape_rewards(get_algorithm("grpo"), torch.tensor([1.0, 1.0]), turn_rewards, mask)
    assert same[0].tolist() == [1.0, 1.0] and same[1] is turn_rewards


def test_group_filters_dispatch_by_preset():
    rewards = torch.tensor([1.0, 1.0, 0.0, 1.0])
    ids = torch.tensor([0, 0, 1, 1])
    assert keep_groups(get_algorithm("dapo"), rewards, ids).tolist() == [False, False, True, True]
    assert keep_groups(get_algorithm("grpo"), rewards, ids).tolist() == [True] * 4
    mask = torch.ones(2, 2)
    truncated = torch.tensor([True, False])
    assert filter_loss_mask(get_algorithm("dapo"), mask, truncated).tolist() == [[0, 0], [1, 1]]
    assert filter_loss_mask(get_algorithm("grpo"), mask, truncated) is mask


def test_group_relative_is_the_estimators_own_field():
    assert {name for name, e in algorithms.ESTIMATORS.items() if e.group_relative} == {"rloo", "grpo"}
    relative = ["rloo", "grpo", "dr_grpo", "dapo", "gspo", "cispo"]
    assert [name for name, p in PRESETS.items() if p.group_relative] == relative


def test_a_new_estimator_marked_group_relative_is_treated_so_by_preflight_and_zero_signal(monkeypatch, tmp_path):
    """Whether an estimator compares a group's samples is its `Estimator` entry, which both the
    pre-flight group-size check and the zero-signal rule read: a new one marked so is refused with
    group_size 1, and its step carries no signal when every group's rewards are equal."""
    estimators = {**algorithms.ESTIMATORS, "pairwise": Estimator(True), "absolute": Estimator(False)}
    monkeypatch.setattr(algorithms, "ESTIMATORS", MappingProxyType(estimators))
    pairwise, absolute = get_algorithm("grpo", advantage="pairwise"), get_algorithm("grpo", advantage="absolute")
    assert pairwise.group_relative and not absolute.group_relative
    config = TrainConfig(algo="grpo", algo_args={"advantage": "pairwise"}, group_size=1, out=str(tmp_path / "run"))
    with pytest.raises(ConfigError, match="compares samples within a group: group_size must be >= 2, got 1"):
        check_run(config)
    rewards_B, group_ids_B = torch.tensor([1.0, 1.0, 0.0, 0.0]), torch.tensor([0, 0, 1, 1])
    advantages_B, mask_BT = torch.ones(4), torch.ones(4, 3)  # not zero: the rule reads the rewards
    assert no_signal(pairwise, rewards_B, group_ids_B, advantages_B, mask_BT)
    assert not no_signal(absolute, rewards_B, group_ids_B, advantages_B, mask_BT)


def test_algo_help_is_generated_from_the_presets(monkeypatch):
    assert preset_help() == (
        "algorithm preset: reinforce, rloo, grpo, dr_grpo, dapo, gspo, cispo, ppo or distill "
        "(on-policy distillation from --teacher)"
    )
    monkeypatch.setattr(algorithms, "PRESETS", MappingProxyType({**PRESETS, "mine": AlgoConfig(name="mine")}))
    assert preset_help().endswith(", distill (on-policy distillation from --teacher) or mine")
