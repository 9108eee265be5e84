"""KL estimators, entropy, aggregation modes with global denominators, and the value loss."""

import math

import pytest
import torch

from rlvr.trainers.kernels.aggregation import aggregate_loss, loss_denominator, masked_mean, turn_ends
from rlvr.trainers.kernels.kl import entropy_from_logits, kl_estimate, kl_penalized_rewards
from rlvr.trainers.kernels.value_loss import value_loss

LN2 = math.log(2.0)


def test_kl_estimators_at_known_log_ratios():
    # log pi - log ref = [ln2, -ln2, 0]:
    # k1 = [0.6931, -0.6931, 0]
    # k2 = 0.5*ln2^2 = 0.2402 (both signs), 0
    # k3 = e^-x - 1 + x: e^-ln2 = 0.5 -> 0.5 - 1 + 0.6931 = 0.1931; e^ln2 = 2 -> 2 - 1 - 0.6931 = 0.3069; 0
    ref = torch.zeros(1, 3, dtype=torch.float64)
    lp = torch.tensor([[LN2, -LN2, 0.0]], dtype=torch.float64)
    assert torch.allclose(kl_estimate(lp, ref, estimator="k1"), lp)
    assert torch.allclose(
        kl_estimate(lp, ref, estimator="k2"), torch.tensor([[0.5 * LN2**2, 0.5 * LN2**2, 0.0]], dtype=torch.float64)
    )
    assert torch.allclose(
        kl_estimate(lp, ref, estimator="k3"), torch.tensor([[LN2 - 0.5, 1.0 - LN2, 0.0]], dtype=torch.float64)
    )
    with pytest.raises(ValueError, match="k4"):
        kl_estimate(lp, ref, estimator="k4")


def test_k1_and_k3_are_unbiased_for_kl_policy_to_ref():
    # pi = [0.8, 0.2], ref = [0.5, 0.5]: KL(pi||ref) = 0.8 ln 1.6 + 0.2 ln 0.4 = 0.19274.
    # The expectation over tokens sampled from pi is the pi-weighted sum over the two tokens.
    pi = torch.tensor([[0.8, 0.2]], dtype=torch.float64)
    ref = torch.tensor([[0.5, 0.5]], dtype=torch.float64)
    exact = 0.8 * math.log(1.6) + 0.2 * math.log(0.4)
    for est in ("k1", "k3"):
        e = (pi * kl_estimate(pi.log(), ref.log(), estimator=est)).sum().item()
        assert abs(e - exact) < 1e-12, est
    assert abs(exact - 0.19274) < 1e-5


def test_k3_is_clamped_on_output_like_verl_low_var_kl():
    # x = log pi - log ref. x = 1: e^-1 - 1 + 1 = 0.36788 (inside). x = 3: e^-3 + 2 = 2.04979.
    # x = -3: e^3 - 4 = 16.0855 -> 10. x = -30: input clamp to -20 first, e^20 - 21 -> 10.
    lp = torch.tensor([[1.0, 3.0, -3.0, -30.0]], dtype=torch.float64, requires_grad=True)
    k3 = kl_estimate(lp, torch.zeros(1, 4, dtype=torch.float64), estimator="k3")
    assert torch.allclose(k3, torch.tensor([[0.367879, 2.049787, 10.0, 10.0]], dtype=torch.float64), atol=1e-6)
    k3.sum().backward()
    # d k3 / dx = 1 - e^-x inside the clamp (x = 1: 0.63212; x = 3: 0.95021), 0 where it acts
    assert torch.allclose(lp.grad, torch.tensor([[0.632121, 0.950213, 0.0, 0.0]], dtype=torch.float64), atol=1e-6)


def _expected_kl_loss_gradient(estimator, pi_logits, ref):
    """E_{y ~ pi}[d kl_estimate(y) / d logits], summed exactly over the vocabulary: what the
    gradient of `coef * kl` in the loss is on average over sampled tokens."""
    logits = pi_logits.clone().requires_grad_(True)
    logp = torch.log_softmax(logits, -1)
    k = kl_estimate(logp.unsqueeze(0), ref.log().unsqueeze(0), estimator=estimator).squeeze(0)
    (grad,) = torch.autograd.grad((logp.exp().detach() * k).sum(), logits)  # the sampling weights carry no gradient
    return grad


def test_kl_in_the_loss_gradients_worked_numbers():
    # pi = [0.5, 0.25, 0.25], ref = [0.25, 0.25, 0.5], gradients w.r.t. pi's logits:
    # k3: E_pi[(1 - ref/pi) grad log pi] = grad KL(ref || pi) = pi - ref = [0.25, 0, -0.25]
    #     (the reverse KL, not KL(pi || ref));
    # k2: E_pi[x grad log pi] = grad KL(pi || ref) = pi * (x - KL), x = [ln2, 0, -ln2],
    #     KL(pi||ref) = 0.5 ln2 - 0.25 ln2 = 0.25 ln2 -> [0.375, -0.0625, -0.3125] * ln2;
    # k1: E_pi[grad log pi] = 0: no expected gradient at all.
    pi = torch.tensor([0.5, 0.25, 0.25], dtype=torch.float64)
    ref = torch.tensor([0.25, 0.25, 0.5], dtype=torch.float64)
    logits = pi.log()
    assert torch.allclose(
        _expected_kl_loss_gradient("k3", logits, ref), torch.tensor([0.25, 0.0, -0.25], dtype=torch.float64), atol=1e-12
    )
    assert torch.allclose(
        _expected_kl_loss_gradient("k2", logits, ref),
        torch.tensor([0.375, -0.0625, -0.3125], dtype=torch.float64) * LN2,
        atol=1e-12,
    )
    assert torch.allclose(
        _expected_kl_loss_gradient("k1", logits, ref), torch.zeros(3, dtype=torch.float64), atol=1e-12
    )


def test_kl_mask_and_extreme_ratios_are_finite():
    lp = torch.tensor([[-100.0, 0.0, float("nan")]], requires_grad=True)
    ref = torch.tensor([[0.0, -100.0, 0.0]])
    k3 = kl_estimate(lp, ref, torch.tensor([[1, 1, 0]]), "k3")
    assert torch.isfinite(k3).all() and k3[0, 2] == 0
    k3.sum().backward()
    assert torch.isfinite(lp.grad).all()


def test_kl_in_reward_per_sequence_and_per_token():
    # coef 0.1: per-sequence reward 1 minus 0.1 * (0.5 + 0.25) = 0.925 (the masked 9 is ignored)
    kl = torch.tensor([[0.5, 0.25, 9.0]])
    mask = torch.tensor([[1, 1, 0]])
    assert torch.allclose(kl_penalized_rewards(torch.tensor([1.0]), kl, mask, 0.1), torch.tensor([0.925]))
    per_token = kl_penalized_rewards(torch.tensor([[0.0, 1.0, 0.0]]), kl, mask, 0.1)
    assert torch.allclose(per_token, torch.tensor([[-0.05, 0.975, 0.0]]))


def test_entropy_from_logits():
    # uniform over 4 -> ln 4; uniform over 2 with two -inf logits -> ln 2; near one-hot -> ~0
    logits = torch.tensor(
        [[[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, -math.inf, -math.inf], [50.0, 0, 0, 0]]], requires_grad=True
    )
    h = entropy_from_logits(logits)
    assert torch.allclose(h, torch.tensor([[math.log(4), LN2, 0.0]]), atol=1e-6)
    h.sum().backward()
    assert torch.isfinite(logits.grad).all()


# Per-token losses of three sequences of lengths 3, 1, 2; masked entries hold junk (100, nan).
LOSS = torch.tensor([[1.0, 2.0, 3.0], [4.0, 100.0, float("nan")], [5.0, 6.0, 100.0]], dtype=torch.float64)
MASK = torch.tensor([[1, 1, 1], [1, 0, 0], [1, 1, 0]])


def test_aggregation_modes_on_unequal_lengths():
    # token_mean: (1+2+3+4+5+6)/6 = 3.5
    # seq_mean_token_mean: (2 + 4 + 5.5)/3 = 3.8333
    # seq_mean_token_sum (RLOO): (6 + 4 + 11)/3 = 7
    # seq_mean_token_sum_norm, L = 4: (6/4 + 4/4 + 11/4)/3 = 1.75
    assert aggregate_loss(LOSS, MASK, "token_mean").item() == pytest.approx(3.5)
    assert aggregate_loss(LOSS, MASK.bool(), "seq_mean_token_mean").item() == pytest.approx(11.5 / 3)
    assert aggregate_loss(LOSS, MASK, "seq_mean_token_sum").item() == pytest.approx(7.0)
    assert aggregate_loss(LOSS, MASK.double(), "seq_mean_token_sum_norm", constant_length=4).item() == pytest.approx(
        1.75
    )
    with pytest.raises(ValueError, match="constant_length"):
        aggregate_loss(LOSS, MASK, "seq_mean_token_sum_norm")
    with pytest.raises(ValueError, match="unknown aggregation"):
        aggregate_loss(LOSS, MASK, "mean")
    with pytest.raises(ValueError, match="denominator"):
        aggregate_loss(LOSS, MASK, "token_mean", denominator=-1)


@pytest.mark.parametrize("mode", ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum", "seq_mean_token_sum_norm"])
def test_minibatch_losses_sum_to_full_batch_loss(mode):
    # Split rows {0} and {1, 2}; each minibatch gets the step's global denominator (the sum of
    # the minibatches' own), so the accumulated loss equals the full-batch loss.
    loss = LOSS.clone().requires_grad_(True)
    parts = [(loss[:1], MASK[:1]), (loss[1:], MASK[1:])]
    denom = sum(loss_denominator(m, mode) for _, m in parts)
    assert denom.item() == (6 if mode == "token_mean" else 3)
    full = aggregate_loss(loss, MASK, mode, denom, constant_length=4)
    acc = sum(aggregate_loss(lo, m, mode, denom, constant_length=4) for lo, m in parts)
    assert torch.allclose(acc, full, rtol=0, atol=1e-12)
    # and so are the gradients (accumulated over minibatches vs one pass)
    (g_full,) = torch.autograd.grad(full, loss)
    (g_acc,) = torch.autograd.grad(acc, loss)
    assert torch.allclose(g_full, g_acc, rtol=0, atol=1e-15) and torch.isfinite(g_full).all()


def test_all_zero_mask_gives_zero_not_nan():
    zero = torch.zeros(2, 3)
    loss = torch.ones(2, 3, requires_grad=True)
    for mode in ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum", "seq_mean_token_sum_norm"):
        assert loss_denominator(zero, mode).item() == 0
        out = aggregate_loss(loss, zero, mode, constant_length=8)
        out.backward()
        assert out.item() == 0.0 and torch.equal(loss.grad, torch.zeros(2, 3))
        loss.grad = None
    assert masked_mean(torch.ones(3), torch.zeros(3)).item() == 0.0


def test_value_loss_clipping_worked_numbers():
    # old 0.5, new 1.0, clip 0.2 -> clipped value 0.7.
    # return 0.0: unclipped 0.5*1.0^2 = 0.5, clipped 0.5*0.7^2 = 0.245 -> 0.5 (gradient V - R = 1)
    # return 1.2: unclipped 0.5*0.2^2 = 0.02, clipped 0.5*0.5^2 = 0.125 -> 0.125 (no gradient)
    v = torch.tensor([[1.0, 1.0, 3.0]], dtype=torch.float64, requires_grad=True)
    old = torch.tensor([[0.5, 0.5, 0.0]], dtype=torch.float64)
    ret = torch.tensor([[0.0, 1.2, 0.0]], dtype=torch.float64)
    out = value_loss(v, old, ret, torch.tensor([[1, 1, 0]]), clip_eps=0.2)
    assert torch.allclose(out.loss, torch.tensor([[0.5, 0.125, 0.0]], dtype=torch.float64))
    assert out.clipped.tolist() == [[False, True, False]]
    out.loss.sum().backward()
    assert torch.allclose(v.grad, torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64))
    plain = value_loss(v, old, ret, torch.ones(1, 3), clip_eps=None)
    assert torch.allclose(plain.loss, torch.tensor([[0.5, 0.02, 4.5]], dtype=torch.float64))
    with pytest.raises(ValueError, match="clip_eps"):
        value_loss(v, old, ret, torch.ones(1, 3), clip_eps=-1.0)


def test_turn_ends_and_lengths():
    # Row 0: turn 1 = tokens 0-2, env tokens 3-4, turn 2 = tokens 5-6, padding 7.
    # Row 1: one turn running to the last column. Row 2: no model token.
    mask = torch.tensor([[1, 1, 1, 0, 0, 1, 1, 0], [0, 1, 1, 1, 1, 1, 1, 1], [0] * 8])
    ends, lengths = turn_ends(mask)
    assert ends.tolist() == [[False, False, True, False, False, False, True, False], [False] * 7 + [True], [False] * 8]
    assert lengths.tolist() == [[0, 0, 3, 0, 0, 0, 2, 0], [0] * 7 + [7], [0] * 8]
