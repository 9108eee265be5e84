"""Algorithm presets: the papers' settings, validation, and one full loss per preset."""
import dataclasses

import pytest
import torch

from trainers.advantages import gae, sequence_advantages
from trainers.aggregation import aggregate_loss
from trainers.algorithms import PRESETS, AlgoConfig, get_algorithm
from trainers.policy_loss import compute_policy_loss

NAMES = ["reinforce", "rloo", "grpo", "dr_grpo", "dapo", "gspo", "cispo", "ppo"]


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
    assert [n for n in NAMES if get_algorithm(n).needs_value_head] == ["ppo"]


def test_get_algorithm_errors_list_known_names_and_fields():
    with pytest.raises(ValueError, match="known: cispo, dapo, dr_grpo, grpo, gspo, ppo, reinforce, rloo"):
        get_algorithm("trpo")
    with pytest.raises(ValueError, match="unknown AlgoConfig field.*clip_eps"):
        get_algorithm("grpo", clip_epsilon=0.3)
    assert get_algorithm("Dr-GRPO").name == "dr_grpo"
    assert get_algorithm("dapo", kl_coef=0.01).kl_in_loss


@pytest.mark.parametrize("bad, match", [
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
])
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
    else:
        adv = sequence_advantages(cfg, rewards).double()
    ref = (lp - 0.1).detach()
    out = compute_policy_loss(cfg, lp, lp.detach(), adv, mask, ref_logprobs=ref)
    loss = aggregate_loss(out.loss, mask, cfg.aggregation, constant_length=cfg.constant_length)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logits.grad).all()
    assert logits.grad.abs().sum() > 0
    assert out.stats["clip_frac"].item() == 0.0  # ratio 1 on the first epoch: nothing clipped
