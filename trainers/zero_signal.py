"""A step without signal trains on nothing, and a run of them says so.

A step carries no signal when its advantages are all zero: every sample of each task got the same
reward, so a group-relative estimator (GRPO, RLOO, REINFORCE with the batch baseline) has nothing
to prefer. Its gradient is then float noise, and Adam (which divides by the gradient's own running
scale) turns noise into full-size steps: the policy drifts on nothing. So the optimizer step is
skipped, counted as the steps that sampled only errors are (`skipped`, no policy version, the
learning-rate schedule not advanced), and the step's metrics record `zero_signal`.

The rule, per estimator, from what the advantages were computed from:
- an estimator marked group-relative (`Estimator.group_relative` in `trainers.algorithms`: RLOO,
  GRPO), or REINFORCE with the batch baseline, without the KL penalty in the reward: every group's
  rewards (the whole batch's for the batch baseline) are exactly equal. Compared on the rewards, the
  advantages' own source, so that no threshold on float values is needed (GRPO's advantages of
  equal rewards are exactly 0 too, `trainers.kernels.advantages`);
- any other (REINFORCE without baseline, GAE with its critic, distillation, the KL in the reward):
  every advantage on a trained token is below `EPS` in size. PPO's advantages come from its critic
  and are not zero, so PPO always trains;
- a step with no trained token at all (overlong filtering removed every row) carries none either.
Regularisers alone (a KL or entropy term in the loss) are not a reason to step: without a reward
signal the policy stays where it is.

`SignalStreak` counts such steps in a row and gives one warning when a streak reaches its limit
(once per streak), saying what it means and what to try.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlvr.trainers.algorithms import AlgoConfig

EPS = 1e-6  # an advantage below this (in reward units) moves nothing


def equal_within_groups(rewards_B: torch.Tensor, group_ids_B: torch.Tensor) -> bool:
    """True when, in every group, all rewards are exactly equal (a group of one included)."""
    for g in torch.unique(group_ids_B):
        r = rewards_B[group_ids_B == g]
        if not bool((r == r[0]).all()):
            return False
    return True


def no_signal(
    algo: AlgoConfig,
    rewards_B: torch.Tensor,
    group_ids_B: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask_BT: torch.Tensor,
) -> bool:
    """Whether a step's advantages carry nothing to learn from (the rule above). `rewards_B` are
    the (shaped) rewards the advantages were computed from; `advantages` is `(B,)` or `(B, T)`."""
    mask_BT = loss_mask_BT > 0
    if not bool(mask_BT.any()):
        return True
    if not algo.needs_teacher and not algo.kl_in_reward:
        if algo.group_relative:
            return equal_within_groups(rewards_B, group_ids_B)
        if algo.advantage == "reinforce" and algo.batch_baseline:
            return bool((rewards_B == rewards_B[0]).all())
    trained = mask_BT.any(dim=1) if advantages.dim() == 1 else mask_BT
    return bool((advantages[trained].abs() < EPS).all())


@dataclass
class SignalStreak:
    """Counts the steps in a row without signal; at `limit` of them (0: never) one warning, once
    per streak. A step with signal ends the streak."""

    limit: int = 5
    steps: int = 0

    def observe(self, step: int, zero: bool) -> str | None:
        """After step `step` (1-based): the warning when this step makes the streak `limit` long."""
        if not zero:
            self.steps = 0
            return None
        self.steps += 1
        if self.steps != self.limit:
            return None
        return (
            f"warning: no reward variance in any group for {self.steps} steps in a row (steps "
            f"{step - self.steps + 1}-{step}): every sample of each task got the same reward, so there is "
            "nothing to learn from and these steps were skipped (no optimizer step). Try a larger "
            "--group-size, a higher --temperature, an easier environment, or check the reward function "
            "with `rlvr eval`"
        )
