"""A step without reward variance trains on nothing (`trainers.zero_signal`): the rule on worked
numbers, the streak's one warning, and a real `rlvr train` run on an environment whose reward is
constant (tiny model, HF sampler, 2 tasks x 2 samples): every step is skipped with `zero_signal`
recorded, one warning names what to try, and the weights are bit-identical to the start (AdamW
took no step, not even its weight decay), while the weight sync is still checked. A run with signal trains as before:
tests/rlvr/test_nothing_produced.py::test_train_survives_a_short_outage_with_one_warning and
tests/trainers/test_loop.py::test_error_episodes_are_dropped_and_counted cover it."""

from __future__ import annotations

import json

import torch
from safetensors.torch import load_file

from rlvr.trainers import checkpoint as ckpt
from rlvr.trainers.algorithms import get_algorithm
from rlvr.trainers.kernels.advantages import grpo_advantages
from rlvr.trainers.model_names import TINY_DIR
from rlvr.trainers.zero_signal import SignalStreak, no_signal

MASK_BT = torch.ones(14, 3)


def test_equal_rewards_in_every_group_are_no_signal():
    rewards_B = torch.full((14,), 0.1)  # two groups of 7, every reward 0.1
    ids_B = torch.arange(2).repeat_interleave(7)
    noise_B = grpo_advantages(rewards_B, ids_B)
    assert torch.equal(noise_B, torch.zeros(14))  # equal rewards: exactly 0, not noise (trainers.kernels.advantages)
    assert no_signal(get_algorithm("grpo"), rewards_B, ids_B, noise_B, MASK_BT)
    assert no_signal(get_algorithm("rloo", kl_coef=0.0), rewards_B, ids_B, noise_B, MASK_BT)
    # RLOO's preset puts the KL in the reward: then its advantages decide (the KL is a signal once it is not 0)
    assert no_signal(get_algorithm("rloo"), rewards_B, ids_B, torch.full((14,), 3e-8), MASK_BT)
    assert not no_signal(get_algorithm("rloo"), rewards_B, ids_B, torch.full((14,), 0.01), MASK_BT)
    one_differs_B = rewards_B.clone()
    one_differs_B[9] = 1.0  # the second group now carries signal
    adv_B = grpo_advantages(one_differs_B, ids_B)
    assert not no_signal(get_algorithm("grpo"), one_differs_B, ids_B, adv_B, MASK_BT)
    assert no_signal(get_algorithm("grpo"), one_differs_B, ids_B, adv_B, torch.zeros(14, 3))  # no token trains


def test_other_estimators_decide_on_their_advantages():
    ids_B = torch.arange(14)
    rewards_B = torch.ones(14)
    plain = get_algorithm("reinforce", batch_baseline=False)
    assert not no_signal(plain, rewards_B, ids_B, rewards_B, MASK_BT)  # the reward itself: every sample pushed up
    assert no_signal(plain, 0 * rewards_B, ids_B, 0 * rewards_B, MASK_BT)
    assert no_signal(get_algorithm("reinforce"), rewards_B, ids_B, rewards_B - 1, MASK_BT)  # batch baseline
    gae_BT = torch.zeros(14, 3)
    gae_BT[3, 1] = 0.2  # the critic's values differ from the returns: PPO has a signal
    assert not no_signal(get_algorithm("ppo"), rewards_B, ids_B, gae_BT, MASK_BT)
    masked_BT = MASK_BT.clone()
    masked_BT[3, 1] = 0  # ... unless that token is not trained on
    assert no_signal(get_algorithm("ppo"), rewards_B, ids_B, gae_BT, masked_BT)


def test_the_streak_warns_once_when_it_reaches_its_limit():
    streak = SignalStreak(limit=3)
    said = [streak.observe(step, zero) for step, zero in enumerate([1, 1, 1, 1, 1, 0, 1, 1, 1], start=1)]
    assert [s is not None for s in said] == [False, False, True, False, False, False, False, False, True]
    assert "for 3 steps in a row (steps 1-3)" in said[2] and "--group-size" in said[2] and "rlvr eval" in said[2]
    assert "(steps 7-9)" in said[8]


def test_a_run_without_reward_variance_skips_every_step_and_says_so_once(tmp_path, capsys):
    """`rlvr train` through its entry point in this process (tests/ is on sys.path for run_test_envs)."""
    from tests.trainers.test_learning import rlvr_train

    out = tmp_path / "run"
    # --device cpu: the weights are compared bit for bit with the shipped (CPU) checkpoint
    argv = ["train", "--device", "cpu", "--env", "run_test_envs:test/FlatThenLearnable-v0", "--env-arg", "flat=100000"]
    argv += ["--steps", "6", "--tasks-per-step", "2", "--group-size", "2", "--max-tokens", "4", "--sampler", "hf"]
    argv += ["--warmup-steps", "0", "--log-every", "0", "--no-progress", "--threads", "1", "--out", str(out)]
    _, err = rlvr_train(argv, capsys)
    warnings = [line for line in err.splitlines() if "no reward variance" in line]
    assert len(warnings) == 1 and "for 5 steps in a row (steps 1-5)" in warnings[0], err[-3000:]
    records = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["zero_signal"], r["skipped"]) for r in records] == [(s, 1, 1) for s in range(1, 7)]
    assert all(r["logprob_gap_max"] < 1e-4 for r in records)  # the weight sync is still checked every step
    saved = load_file(ckpt.latest_checkpoint(out) / "model.safetensors")
    start = load_file(TINY_DIR / "model.safetensors")
    assert saved.keys() == start.keys() and all(torch.equal(saved[k], start[k]) for k in start)
