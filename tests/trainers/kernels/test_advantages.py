"""Advantage estimators, whitening, GAE and DAPO's filters against hand-computed numbers."""

import math

import pytest
import torch

from rlvr.trainers.algorithms import get_algorithm
from rlvr.trainers.dispatch import sequence_advantages, token_advantages
from rlvr.trainers.kernels.advantages import (
    dynamic_sampling_keep,
    episode_rows,
    gae,
    grpo_advantages,
    overlong_filter,
    overlong_penalty,
    reinforce_advantages,
    rloo_advantages,
    whiten,
)


def close(a, b, tol=1e-4):
    return torch.allclose(
        torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64), atol=tol, rtol=0
    )


def test_rloo_worked_example():
    # [0,0,1,0]: for a 0, the other three average 1/3 -> 0 - 1/3; for the 1, others average 0 -> +1.
    assert close(rloo_advantages([[0.0, 0.0, 1.0, 0.0]]), [-1 / 3, -1 / 3, 1.0, -1 / 3])


def test_grpo_sample_std_worked_example():
    # mean 0.25; deviations -0.25 (x3), +0.75; sum of squares 3*0.0625 + 0.5625 = 0.75;
    # sample var 0.75/3 = 0.25 -> std 0.5: -0.25/0.5 = -0.5, 0.75/0.5 = +1.5.
    adv = grpo_advantages([[0.0, 0.0, 1.0, 0.0]], std_unbiased=True, eps=1e-12)
    assert close(adv, [-0.5, -0.5, 1.5, -0.5], 1e-6)


def test_dr_grpo_no_std_worked_example():
    # Dr. GRPO: only the group mean 0.25 is subtracted.
    adv = grpo_advantages([[0.0, 0.0, 1.0, 0.0]], scale_by_std=False)
    assert close(adv, [-0.25, -0.25, 0.75, -0.25], 1e-7)


def test_grpo_equal_rewards_give_exactly_zero_beside_a_group_with_signal():
    # Seven 0.1s: their float32 mean misses 0.1 by an ulp (~7e-9), which / (std 0 + 1e-6) would be
    # ~7e-3 of noise advantage; equal rewards are exactly 0, and the other group is as it was.
    rewards = torch.tensor([[0.1] * 7, [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]], dtype=torch.float32)
    adv = grpo_advantages(rewards)
    assert torch.equal(adv[:7], torch.zeros(7))
    assert close(adv[7:], grpo_advantages(rewards[1:]), 0.0)
    assert torch.equal(grpo_advantages(rewards, scale_by_std=False)[:7], torch.zeros(7))


def test_grpo_population_std_worked_example():
    # [1,1,0,1,0]: mean 0.6; population var (3*0.16 + 2*0.36)/5 = 0.24, std 0.4899;
    # 0.4/0.4899 = +0.8165, -0.6/0.4899 = -1.2247.
    adv = grpo_advantages([[1.0, 1.0, 0.0, 1.0, 0.0]], std_unbiased=False)
    assert close(adv, [0.8165, 0.8165, -1.2247, 0.8165, -1.2247])


def test_flat_rewards_with_group_ids_match_grid_and_handle_unequal_groups():
    # Same two groups as a grid and shuffled with arbitrary labels; plus a group of one (label 5).
    grid = torch.tensor([[0.0, 0.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    flat = torch.tensor([0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 3.0])
    ids = torch.tensor([9, 4, 9, 9, 9, 4, 4, 4, 5])
    expected = grpo_advantages(grid)  # group 9 is grid row 0 in order, group 4 is row 1
    got = grpo_advantages(flat, ids)
    assert close(got[[0, 2, 4, 3]], expected[:4], 1e-6)
    assert close(got[[1, 5, 6, 7]], expected[4:], 1e-6)
    # A group of one carries no relative signal: advantage 0 (no NaN), for GRPO and RLOO alike.
    assert got[8] == 0 and rloo_advantages(flat, ids)[8] == 0


def test_equal_rewards_give_zero_not_nan():
    assert torch.equal(grpo_advantages([[1.0, 1.0, 1.0]]), torch.zeros(3))
    assert torch.equal(rloo_advantages([[0.0, 0.0]]), torch.zeros(2))


def test_reinforce_with_and_without_batch_baseline():
    # mean of [1, 0, 0, 1, 1] is 0.6
    assert close(reinforce_advantages([1.0, 0.0, 0.0, 1.0, 1.0]), [1, 0, 0, 1, 1])
    assert close(reinforce_advantages([1.0, 0.0, 0.0, 1.0, 1.0], baseline=True), [0.4, -0.6, -0.6, 0.4, 0.4], 1e-6)


def test_bad_rewards_raise_clear_errors():
    with pytest.raises(ValueError, match="NaN or inf"):
        grpo_advantages([[0.0, float("nan")]])
    with pytest.raises(ValueError, match="group_ids"):
        grpo_advantages([0.0, 1.0])
    with pytest.raises(ValueError, match="group_ids"):
        rloo_advantages([0.0, 1.0], group_ids_B=[0])
    with pytest.raises(ValueError, match="num_groups"):
        grpo_advantages(torch.zeros(2, 2, 2))


def test_whiten_worked_example_and_mask():
    # [1,2,3,4]: mean 2.5, unbiased var (2.25+0.25+0.25+2.25)/3 = 5/3 (TRL, verl), std 1.29099:
    # -1.5/1.29099 = -1.16190, -0.5/1.29099 = -0.38730
    w = whiten(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    assert close(w, [-1.16190, -0.38730, 0.38730, 1.16190])
    # masked entries (the 100) are ignored and come back as 0
    x = torch.tensor([[1.0, 2.0, 100.0], [3.0, 4.0, 100.0]])
    m = torch.tensor([[1, 1, 0], [1, 1, 0]])
    assert close(whiten(x, m), [[-1.16190, -0.38730, 0], [0.38730, 1.16190, 0]])
    assert torch.equal(whiten(x, torch.zeros_like(m)), torch.zeros_like(x))
    # one entry: variance 0 (divided by 1, not 0), so it is centred to 0, not NaN
    assert torch.equal(whiten(torch.tensor([3.0])), torch.zeros(1))


def test_gae_hand_computed():
    # gamma 0.9, lambda 0.5, values [0.5, 0.4, 0.7, 0.8], reward 1 at the last token:
    # d3 = 1 - 0.8 = 0.2                      A3 = 0.2
    # d2 = 0.9*0.8 - 0.7 = 0.02               A2 = 0.02 + 0.45*0.2    = 0.11
    # d1 = 0.9*0.7 - 0.4 = 0.23               A1 = 0.23 + 0.45*0.11   = 0.2795
    # d0 = 0.9*0.4 - 0.5 = -0.14              A0 = -0.14 + 0.45*0.2795 = -0.014225
    # returns = A + V = [0.485775, 0.6795, 0.81, 1.0]
    r = torch.tensor([[0.0, 0.0, 0.0, 1.0]], dtype=torch.float64)
    v = torch.tensor([[0.5, 0.4, 0.7, 0.8]], dtype=torch.float64)
    adv, ret = gae(r, v, torch.ones(1, 4), gamma=0.9, lam=0.5)
    assert close(adv, [[-0.014225, 0.2795, 0.11, 0.2]], 1e-12)
    assert close(ret, [[0.485775, 0.6795, 0.81, 1.0]], 1e-12)


def test_gae_gamma_lambda_one_is_monte_carlo():
    # gamma = lambda = 1: A_t = R - V_t, returns = R for every token.
    r = torch.tensor([[0.0, 0.0, 2.0]])
    v = torch.tensor([[0.5, 1.0, 1.5]])
    adv, ret = gae(r, v, torch.ones(1, 3, dtype=torch.bool), 1.0, 1.0)
    assert close(adv, [[1.5, 1.0, 0.5]], 1e-6) and close(ret, [[2.0, 2.0, 2.0]], 1e-6)


def test_gae_skips_env_tokens_and_padding():
    # Multi-turn row: model tokens at 0,1 and 4,5, env tokens at 2,3, padding at 6. Env/pad
    # values are garbage (99, nan) and must not matter. The env's turn reward 0.5 sits on env
    # token 3 and is credited to model token 1; the final reward 1 sits on model token 5.
    # Expected = GAE over the compacted sequence of 4 model tokens with rewards [0, 0.5, 0, 1].
    nan = float("nan")
    r = torch.tensor([[0.0, 0.0, 0.0, 0.5, 0.0, 1.0, 0.0]], dtype=torch.float64)
    v = torch.tensor([[0.5, 0.4, 99.0, nan, 0.7, 0.8, nan]], dtype=torch.float64)
    m = torch.tensor([[1, 1, 0, 0, 1, 1, 0]])
    adv, ret = gae(r, v, m, gamma=0.9, lam=0.5)
    # compacted: d3 = 0.2, A3 = 0.2; d2 = 0.02, A2 = 0.11;
    # d1 = 0.5 + 0.63 - 0.4 = 0.73, A1 = 0.73 + 0.45*0.11 = 0.7795;
    # d0 = 0.36 - 0.5 = -0.14, A0 = -0.14 + 0.45*0.7795 = 0.210775
    assert close(adv, [[0.210775, 0.7795, 0, 0, 0.11, 0.2, 0]], 1e-12)
    assert close(ret, [[0.710775, 1.1795, 0, 0, 0.81, 1.0, 0]], 1e-12)
    # A fully padded row is all zeros; a reward before any model token is an error.
    adv, ret = gae(torch.zeros(1, 3), torch.ones(1, 3), torch.zeros(1, 3))
    assert torch.equal(adv, torch.zeros(1, 3)) and torch.equal(ret, torch.zeros(1, 3))
    with pytest.raises(ValueError, match="before their first model token"):
        gae(torch.tensor([[1.0, 0.0]]), torch.zeros(1, 2), torch.tensor([[0, 1]]))
    with pytest.raises(ValueError, match="gamma"):
        gae(r, v, m, gamma=1.5)


def test_episode_rows_marks_each_episodes_first_row_and_maps_rows_to_episodes():
    first, index = episode_rows([5, 5, 2, 9, 9, 9])
    assert first.tolist() == [True, False, True, True, False, False] and index.tolist() == [0, 0, 1, 2, 2, 2]
    first, index = episode_rows([3, 1, 3])  # ids need not be sorted nor adjacent
    assert first.tolist() == [True, True, False] and index.tolist() == [0, 1, 0]
    with pytest.raises(ValueError, match="integers"):
        episode_rows([0.0, 1.0])


def test_an_agent_episode_of_several_segments_counts_once_in_its_group():
    # Rows 0 and 1 are two segments of one episode (reward 1); group 0 holds two episodes, not three.
    rewards = torch.tensor([1.0, 1.0, 0.0, 0.0, 1.0])
    groups, episodes = torch.tensor([0, 0, 0, 1, 1]), torch.tensor([0, 0, 1, 2, 3])
    rloo = get_algorithm("rloo")
    # per episode: group 0 is [1, 0] -> +1, -1; group 1 is [0, 1] -> -1, +1; each segment its episode's
    assert close(sequence_advantages(rloo, rewards, groups, episodes), [1, 1, -1, -1, 1])
    # counted per row instead, the episode would weigh twice: row 2 would be 0 - mean(1, 1) = -1, rows 0-1 +0.5
    assert close(sequence_advantages(rloo, rewards, groups), [0.5, 0.5, -1, -1, 1])
    grpo = get_algorithm("grpo")
    once = sequence_advantages(grpo, rewards, groups, episodes)
    assert close(once, sequence_advantages(grpo, rewards[[0, 2, 3, 4]], groups[[0, 2, 3, 4]])[[0, 0, 1, 2, 3]])
    assert close(
        sequence_advantages(grpo, rewards, groups, torch.arange(5)), sequence_advantages(grpo, rewards, groups)
    )


def test_sequence_advantages_dispatch_by_preset():
    rewards = torch.tensor([[0.0, 0.0, 1.0, 0.0]])
    assert close(sequence_advantages(get_algorithm("rloo"), rewards), [-1 / 3, -1 / 3, 1, -1 / 3])
    assert close(sequence_advantages(get_algorithm("dr_grpo"), rewards), [-0.25, -0.25, 0.75, -0.25])
    w = sequence_advantages(get_algorithm("grpo", whiten_advantages=True), rewards)
    assert close(w.mean(), 0.0, 1e-6) and close(w.pow(2).sum() / 3, 1.0, 1e-5)  # unbiased: n - 1 = 3
    with pytest.raises(ValueError, match="gae"):
        sequence_advantages(get_algorithm("ppo"), rewards)


def test_token_advantages_whiten_over_masked_tokens_only():
    # ppo preset (gamma 1, lambda 0.95, whitened): raw GAE, then whitened over the 3 model tokens
    # (the padded 7.0 value is ignored); returns stay unwhitened (A + V = 1.0 at the last token).
    r = torch.tensor([[0.0, 0.0, 1.0, 0.0]], dtype=torch.float64)
    v = torch.tensor([[0.5, 0.4, 0.8, 7.0]], dtype=torch.float64)
    m = torch.tensor([[1, 1, 1, 0]])
    adv, ret = token_advantages(get_algorithm("ppo"), r, v, m)
    raw, raw_ret = gae(r, v, m, 1.0, 0.95)
    assert torch.equal(ret, raw_ret) and ret[0, 2] == 1.0
    assert close(adv, whiten(raw, m), 1e-12) and adv[0, 3] == 0
    assert close(adv[m.bool()].mean(), 0.0, 1e-9) and close(adv[m.bool()].pow(2).sum() / 2, 1.0, 1e-6)


def test_dynamic_sampling_keeps_groups_with_signal():
    # group rows: all wrong, mixed, all right, mixed partial credit
    grid = [[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.5, 0.5, 0.25]]
    assert dynamic_sampling_keep(grid).tolist() == [False, True, False, True]
    # flat form answers per episode; a group of one has no signal
    keep = dynamic_sampling_keep([1.0, 1.0, 0.0, 1.0, 0.3], group_ids_B=[3, 3, 8, 8, 1])
    assert keep.tolist() == [False, False, True, True, False]


def test_overlong_filter_masks_truncated_rows():
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    out = overlong_filter(mask, [False, True, False])
    assert torch.equal(out, torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]))
    assert out.dtype == mask.dtype
    bmask = mask.bool()
    assert overlong_filter(bmask, torch.tensor([True, False, False])).sum().item() == 4
    with pytest.raises(ValueError, match="truncated"):
        overlong_filter(mask, [True])


def test_soft_overlong_penalty_worked_numbers():
    # DAPO: L_max = 10, L_buf = 2 -> free up to 8 tokens, then -(len - 8)/2, -1 at 10 and beyond.
    pen = overlong_penalty(torch.tensor([5, 8, 9, 10, 12]), max_length=10, buffer=2)
    assert close(pen, [0.0, 0.0, -0.5, -1.0, -1.0], 1e-7)
    # a factor scales it; a fractional buffer (0.2 of 12 = 2.4): 11 tokens -> -(11 - 9.6)/2.4
    assert close(overlong_penalty(torch.tensor([11]), 12, 2.4, factor=0.5), [-0.5 * 1.4 / 2.4], 1e-6)
    with pytest.raises(ValueError, match="buffer"):
        overlong_penalty(torch.tensor([1]), 10, 0)


def test_hostile_sizes_are_fast_and_finite():
    # 4096 groups of 16 and a 2048-token GAE stay quick and finite.
    r = torch.randint(0, 2, (4096, 16)).float()
    assert torch.isfinite(grpo_advantages(r)).all()
    adv, _ = gae(torch.zeros(4, 2048), torch.rand(4, 2048), torch.ones(4, 2048))
    assert torch.isfinite(adv).all() and not math.isnan(adv.sum().item())
