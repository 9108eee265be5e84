"""Rollout correction against hand-computed numbers: each mode's weights, kept tokens and stats."""

import math

import pytest
import torch

from rlvr.trainers.config import ConfigError, TrainConfig
from rlvr.trainers.kernels.rollout_correction import Correction, correction_weights, effective_sample_size
from rlvr.trainers.setting_choices import CORRECTIONS

E = math.e

# Two sequences, cap c = 2. log(pi_old / mu) per token:
#   row 0: +1, -1, 0 (and a padding token)  -> rho_t = e, 1/e, 1;  sequence: e^0 = 1
#   row 1: +0.5, +0.5                       -> rho_t = e^0.5 twice; sequence: e^1 = e
OLD = torch.tensor([[-1.0, -2.0, -3.0, -1.0], [-1.0, -1.0, 0.0, 0.0]])
SAMPLER = torch.tensor([[-2.0, -1.0, -3.0, -9.0], [-1.5, -1.5, 0.0, 0.0]])
MASK = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
R = math.exp(0.5)


def run(mode):
    return correction_weights(OLD, SAMPLER, MASK, mode, cap=2.0)


def test_token_tis_truncates_each_token_at_the_cap():
    c = run("token_tis")
    torch.testing.assert_close(c.weights, torch.tensor([[2.0, 1 / E, 1.0, 0.0], [R, R, 0.0, 0.0]]))
    assert torch.equal(c.keep, MASK.bool())
    weights = [2.0, 1 / E, 1.0, R, R]
    assert c.stats["is_ratio_mean"] == pytest.approx((E + 1 / E + 1 + 2 * R) / 5)
    assert c.stats["is_ratio_max"] == pytest.approx(E)
    assert c.stats["is_weight_mean"] == pytest.approx(sum(weights) / 5)
    assert c.stats["is_ess"] == pytest.approx(sum(weights) ** 2 / (5 * sum(w * w for w in weights)))
    assert c.stats["is_capped_frac"] == pytest.approx(1 / 5)  # only e was capped
    assert c.stats["is_masked_frac"] == 0.0


def test_sequence_tis_uses_the_product_of_token_ratios():
    c = run("sequence_tis")
    # row 0: e * 1/e * 1 = 1; row 1: e^0.5 * e^0.5 = e, capped at 2
    torch.testing.assert_close(c.weights, torch.tensor([[1.0, 1.0, 1.0, 0.0], [2.0, 2.0, 0.0, 0.0]]))
    assert c.stats["is_ratio_mean"] == pytest.approx((1 + E) / 2)  # over sequences
    assert c.stats["is_ess"] == pytest.approx(3**2 / (2 * 5))  # weights 1 and 2
    assert c.stats["is_capped_frac"] == pytest.approx(1 / 2)


def test_token_mask_drops_tokens_outside_the_bounds_and_keeps_the_others_ratio():
    c = run("token_mask")
    # e > 2 and 1/e < 1/2 leave; 1 and e^0.5 = 1.65 stay, weighted by their ratio
    keep = torch.tensor([[False, False, True, False], [True, True, False, False]])
    assert torch.equal(c.keep, keep)
    torch.testing.assert_close(c.weights, torch.tensor([[0.0, 0.0, 1.0, 0.0], [R, R, 0.0, 0.0]]))
    assert c.stats["is_masked_frac"] == pytest.approx(2 / 5)
    assert c.stats["is_weight_mean"] == pytest.approx((1 + 2 * R) / 3)
    assert c.stats["is_capped_frac"] == 0.0


def test_sequence_mask_drops_whole_sequences():
    c = run("sequence_mask")
    # row 0's ratio 1 stays; row 1's e > 2 leaves, all its tokens with it
    assert torch.equal(c.keep, torch.tensor([[True, True, True, False], [False, False, False, False]]))
    torch.testing.assert_close(c.weights, torch.tensor([[1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]]))
    assert c.stats["is_masked_frac"] == pytest.approx(2 / 5)  # tokens
    assert c.stats["is_ess"] == pytest.approx(0.5)  # sequence weights 1 and 0


def test_equal_policies_give_weight_one_everywhere():
    for mode in Correction:
        c = correction_weights(OLD, OLD, MASK, mode, cap=1.0)
        torch.testing.assert_close(c.weights, MASK.float())
        assert c.stats["is_ess"] == pytest.approx(1.0) and c.stats["is_masked_frac"] == 0.0


def test_extreme_log_ratios_stay_finite():
    old = torch.tensor([[0.0, 0.0]])
    sampler = torch.tensor([[-1e4, 1e4]])  # a hostile or broken sampler: ratios e^(+-10000)
    for mode in Correction:
        c = correction_weights(old, sampler, torch.ones(1, 2), mode, cap=2.0)
        assert torch.isfinite(c.weights).all() and all(math.isfinite(v) for v in c.stats.values())


def test_effective_sample_size_worked_numbers():
    assert effective_sample_size(torch.ones(4)) == pytest.approx(1.0)
    assert effective_sample_size(torch.tensor([1.0, 0, 0, 0])) == pytest.approx(0.25)
    assert effective_sample_size(torch.tensor([1.0, 3.0])) == pytest.approx(16 / 20)
    assert effective_sample_size(torch.zeros(3)) == 0.0


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="cap"):
        correction_weights(OLD, SAMPLER, MASK, "token_tis", cap=0.5)
    with pytest.raises(ValueError):
        correction_weights(OLD, SAMPLER, MASK, "geometric", cap=2.0)
    with pytest.raises(ConfigError, match="tis_cap"):
        TrainConfig(tis_cap=0.5).validate()
    with pytest.raises(ConfigError, match="rollout_correction"):
        TrainConfig(rollout_correction="nope").validate()
    assert CORRECTIONS == tuple(Correction)  # the config's choices are the kernel's modes
