"""Policy losses against hand-computed numbers, and autograd checks of their gradients."""

import math

import pytest
import torch

from rlvr.trainers.algorithms import get_algorithm
from rlvr.trainers.dispatch import compute_policy_loss
from rlvr.trainers.kernels.aggregation import aggregate_loss
from rlvr.trainers.kernels.policy_loss import (
    cispo_loss,
    clipped_policy_loss,
    importance_ratio,
    pg_loss,
)

LN = math.log


def lp_pair(ratios, dtype=torch.float64):
    """(logprobs with grad, old_logprobs) whose token ratios are `ratios` (one row)."""
    old = torch.full((1, len(ratios)), LN(0.5), dtype=dtype)
    lp = (old + torch.log(torch.tensor([ratios], dtype=dtype))).requires_grad_(True)
    return lp, old


def test_clip_worked_examples():
    # eps 0.2: ratio 1.5, A=+1 -> min(1.5, 1.2) = 1.2; ratio 0.5, A=-1 -> min(-0.5, -0.8) = -0.8.
    # The loss is minus the objective; both tokens are clipped (no gradient).
    lp, old = lp_pair([1.5, 0.5])
    out = clipped_policy_loss(lp, old, torch.tensor([[1.0, -1.0]]), torch.ones(1, 2), eps_low=0.2)
    assert torch.allclose(-out.loss, torch.tensor([[1.2, -0.8]], dtype=torch.float64))
    assert out.clipped.tolist() == [[True, True]]
    out.loss.sum().backward()
    assert torch.equal(lp.grad, torch.zeros_like(lp))


def test_unclipped_side_keeps_gradient():
    # ratio 1.1, A=+1 is inside [0.8, 1.2]: loss -1.1, d(-r*A)/d logp = -r*A = -1.1.
    # ratio 1.5, A=-1 is on the pessimistic side (min picks -1.5): loss 1.5, gradient +1.5.
    lp, old = lp_pair([1.1, 1.5])
    out = clipped_policy_loss(lp, old, torch.tensor([[1.0, -1.0]]), torch.ones(1, 2), eps_low=0.2)
    assert torch.allclose(out.loss, torch.tensor([[-1.1, 1.5]], dtype=torch.float64))
    out.loss.sum().backward()
    assert torch.allclose(lp.grad, torch.tensor([[-1.1, 1.5]], dtype=torch.float64))
    assert out.clipped.tolist() == [[False, False]]


def test_clip_higher_is_asymmetric():
    # eps_low 0.2, eps_high 0.28 (DAPO): ratio 1.25, A=+1 not clipped (objective 1.25);
    # ratio 0.75, A=-1 clipped at 0.8 (objective -0.8). With symmetric 0.2, 1.25 -> 1.2.
    lp, old = lp_pair([1.25, 0.75])
    adv = torch.tensor([[1.0, -1.0]])
    out = clipped_policy_loss(lp, old, adv, torch.ones(1, 2), eps_low=0.2, eps_high=0.28)
    assert torch.allclose(-out.loss, torch.tensor([[1.25, -0.8]], dtype=torch.float64))
    sym = clipped_policy_loss(lp, old, adv, torch.ones(1, 2), eps_low=0.2)
    assert torch.allclose(-sym.loss, torch.tensor([[1.2, -0.8]], dtype=torch.float64))


def test_dual_clip_bounds_negative_advantages():
    # ratio 5, A=-1: PPO loss max(5, 1.2) = 5; dual clip c=3 caps it at -c*A = 3 (no gradient).
    # A=+1 tokens are untouched by the dual clip: ratio 5 -> loss -1.2.
    lp, old = lp_pair([5.0, 5.0])
    adv = torch.tensor([-1.0, 1.0]).reshape(1, 2)
    plain = clipped_policy_loss(lp, old, adv, torch.ones(1, 2), eps_low=0.2)
    dual = clipped_policy_loss(lp, old, adv, torch.ones(1, 2), eps_low=0.2, dual_clip=3.0)
    assert torch.allclose(plain.loss, torch.tensor([[5.0, -1.2]], dtype=torch.float64))
    assert torch.allclose(dual.loss, torch.tensor([[3.0, -1.2]], dtype=torch.float64))
    assert dual.clipped.tolist() == [[True, True]]  # the A<0 token by the dual clip, the A>0 one by eps
    dual.loss.sum().backward()
    assert torch.equal(lp.grad, torch.zeros_like(lp))
    with pytest.raises(ValueError, match="dual_clip"):
        clipped_policy_loss(lp, old, adv, torch.ones(1, 2), dual_clip=0.5)


def test_gspo_sequence_ratio_is_length_normalised_geometric_mean():
    # Row 0: log-ratios 0.1, 0.3 and a masked 5.0 -> mean 0.2 -> s = e^0.2 = 1.2214 on both tokens.
    # Row 1: one token with log-ratio -0.4 -> s = e^-0.4 = 0.6703.
    old = torch.zeros(2, 3, dtype=torch.float64)
    lp = torch.tensor([[0.1, 0.3, 5.0], [-0.4, 0.0, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    s = importance_ratio(lp, old, mask, level="sequence")
    assert torch.allclose(s, torch.tensor([[1.2214, 1.2214, 1.0], [0.6703, 1.0, 1.0]], dtype=torch.float64), atol=1e-4)
    # GSPO eps 3e-4 / 4e-4, A=+1 on row 0: objective clipped to 1.0004; A=-1 on row 1: clip at
    # 0.9997, min(-0.6703, -0.9997) = -0.9997.
    out = clipped_policy_loss(lp, old, torch.tensor([1.0, -1.0]), mask, 3e-4, 4e-4, ratio_level="sequence")
    assert torch.allclose(
        -out.loss, torch.tensor([[1.0004, 1.0004, 0], [-0.9997, 0, 0]], dtype=torch.float64), atol=1e-9
    )


def test_cispo_detached_clipped_weight():
    # ratio 1.5, A=+1, eps_high 0.2: weight clip(1.5) = 1.2, detached, so d loss / d logp = -1.2*A.
    # ratio 0.5, A=-1, eps_low 1.0 (no lower bound): weight 0.5, gradient -0.5*(-1) = +0.5.
    # Unlike PPO's clip, the capped token still gets a gradient.
    lp, old = lp_pair([1.5, 0.5])
    out = cispo_loss(lp, old, torch.tensor([[1.0, -1.0]]), torch.ones(1, 2), eps_low=1.0, eps_high=0.2)
    # loss = -w*A*logp with logp = ln(0.5*r): token 0: -1.2*1*ln(0.75); token 1: -0.5*(-1)*ln(0.25).
    expected = torch.tensor([[-1.2 * LN(0.75), 0.5 * LN(0.25)]], dtype=torch.float64)
    assert torch.allclose(out.loss, expected)
    assert out.clipped.tolist() == [[True, False]]
    out.loss.sum().backward()
    assert torch.allclose(lp.grad, torch.tensor([[-1.2, 0.5]], dtype=torch.float64))


def _logits_and_actions(B=3, T=4, V=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, T, V, generator=g, dtype=torch.float64).requires_grad_(True)
    actions = torch.randint(0, V, (B, T), generator=g)
    return logits, actions


def _logprobs(logits, actions):
    return torch.log_softmax(logits, -1).gather(-1, actions.unsqueeze(-1)).squeeze(-1)


def test_on_policy_gradient_is_reinforce():
    # d/dz log_softmax(z)[a] = onehot(a) - softmax(z), so the token-mean loss -A*log pi has
    # gradient on logits[b,t] = -(A_b * m_bt / N) * (onehot(a_bt) - softmax(z_bt)), N = 7 tokens.
    logits, actions = _logits_and_actions()
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 0, 0]], dtype=torch.float64)
    adv = torch.tensor([1.5, -0.5, 2.0], dtype=torch.float64)
    onehot = torch.nn.functional.one_hot(actions, 5).double()
    expected = -(adv[:, None, None] * mask[..., None] / 7.0) * (onehot - torch.softmax(logits, -1))
    expected = expected.detach()

    lp = _logprobs(logits, actions)
    aggregate_loss(pg_loss(lp, adv, mask).loss, mask, "token_mean").backward()
    assert torch.allclose(logits.grad, expected, atol=1e-12)

    # The clipped loss at ratio 1 (old = current, detached) and CISPO have the same gradient.
    for loss_fn in (clipped_policy_loss, cispo_loss):
        logits.grad = None
        lp = _logprobs(logits, actions)
        out = loss_fn(lp, lp.detach(), adv, mask)
        aggregate_loss(out.loss, mask, "token_mean").backward()
        assert torch.allclose(logits.grad, expected, atol=1e-12), loss_fn.__name__


def test_gspo_gradient_at_ratio_one():
    # grad s_i = (1/|y_i|) sum_t grad log pi_t at s_i = 1; with the sequence mean over 3 rows the
    # gradient on logits[b,t] is -(A_b * m_bt / (3 * |y_b|)) * (onehot - softmax).
    logits, actions = _logits_and_actions(seed=1)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 0, 0, 0]], dtype=torch.float64)
    adv = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    lens = mask.sum(-1)
    onehot = torch.nn.functional.one_hot(actions, 5).double()
    expected = (-(adv / (3 * lens))[:, None, None] * mask[..., None] * (onehot - torch.softmax(logits, -1))).detach()
    lp = _logprobs(logits, actions)
    out = clipped_policy_loss(lp, lp.detach(), adv, mask, 3e-4, 4e-4, ratio_level="sequence")
    aggregate_loss(out.loss, mask, "seq_mean_token_mean").backward()
    assert torch.allclose(logits.grad, expected, atol=1e-12)


def test_compute_policy_loss_adds_kl_entropy_and_is_weights():
    # grpo preset: kl_coef 0.04, k3 in the loss. At ratio 1, A=+1, log-ratio to ref ln 2:
    # policy loss -1, k3 = 0.5 - 1 + ln2 = 0.19315, entropy 0.5 with coef 0.1, IS weight 0.5:
    # total = -1*0.5 + 0.04*0.19315 - 0.1*0.5 = -0.542274.
    cfg = get_algorithm("grpo", entropy_coef=0.1)
    lp = torch.full((1, 2), LN(0.5), dtype=torch.float64)
    ref = lp - LN(2.0)
    mask = torch.tensor([[1, 0]])
    out = compute_policy_loss(
        cfg,
        lp,
        lp,
        torch.tensor([1.0]),
        mask,
        ref_logprobs_BT=ref,
        entropy_BT=torch.full((1, 2), 0.5),
        is_weights_BT=torch.full((1, 2), 0.5),
    )
    k3 = 0.5 - 1 + LN(2.0)
    assert torch.allclose(out.loss, torch.tensor([[-0.5 + 0.04 * k3 - 0.05, 0.0]], dtype=torch.float64))
    with pytest.raises(ValueError, match="ref_logprobs"):
        compute_policy_loss(cfg, lp, lp, torch.tensor([1.0]), mask)
    # cispo and reinforce presets dispatch to their losses
    c = compute_policy_loss(get_algorithm("cispo"), lp, lp, torch.tensor([1.0]), mask)
    assert torch.allclose(c.loss, torch.tensor([[-LN(0.5), 0.0]], dtype=torch.float64))
    p = compute_policy_loss(get_algorithm("reinforce"), lp, None, torch.tensor([2.0]), mask)
    assert torch.allclose(p.loss, torch.tensor([[-2 * LN(0.5), 0.0]], dtype=torch.float64))


def test_empty_mask_and_garbage_off_mask_stay_finite():
    lp = torch.tensor([[float("-inf"), float("nan")]], requires_grad=True)
    old = torch.tensor([[float("-inf"), 0.0]])
    for out in (
        clipped_policy_loss(lp, old, torch.tensor([1.0]), torch.zeros(1, 2), dual_clip=3.0),
        cispo_loss(lp, old, torch.tensor([1.0]), torch.zeros(1, 2)),
        pg_loss(lp, torch.tensor([1.0]), torch.zeros(1, 2)),
    ):
        assert torch.equal(out.loss, torch.zeros(1, 2))
        assert torch.isfinite(out.ratio).all() and not out.clipped.any()
        loss = aggregate_loss(out.loss, torch.zeros(1, 2), "token_mean")
        loss.backward()
        assert loss.item() == 0.0 and torch.isfinite(lp.grad).all()
        lp.grad = None


def test_shape_errors_are_clear():
    lp = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="advantages"):
        clipped_policy_loss(lp, lp, torch.zeros(3), torch.ones(2, 3))
    with pytest.raises(ValueError, match="mask"):
        pg_loss(lp, torch.zeros(2), torch.ones(2, 4))
    with pytest.raises(ValueError, match="ratio level"):
        importance_ratio(lp, lp, torch.ones(2, 3), level="word")
    with pytest.raises(ValueError, match="epsilons"):
        clipped_policy_loss(lp, lp, torch.zeros(2), torch.ones(2, 3), eps_low=-0.1)
