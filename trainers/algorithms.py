"""Named algorithms as presets over the maths: `AlgoConfig`, `PRESETS`, `get_algorithm`.

    cfg = get_algorithm("dapo", kl_coef=0.01)   # a preset with overrides, validated

The training loop reads the fields: which advantage estimator (`advantages.sequence_advantages`
or `advantages.token_advantages`), which policy loss (`policy_loss.compute_policy_loss`), how to aggregate
(`aggregation.aggregate_loss`), where the KL goes, whether to filter groups and overlong samples,
and how many epochs to run over one rollout batch.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from trainers.aggregation import AGGREGATIONS
from trainers.kl import KL_ESTIMATORS
from trainers.policy_loss import LOSS_TYPES, RATIO_LEVELS

ADVANTAGES = ("reinforce", "rloo", "grpo", "gae")
KL_PLACEMENTS = ("reward", "loss")


@dataclass(frozen=True)
class AlgoConfig:
    name: str = "custom"
    # advantages
    advantage: str = "grpo"  # one of ADVANTAGES
    batch_baseline: bool = False  # reinforce: subtract the batch-mean reward
    scale_by_std: bool = True  # grpo: divide by the group std (False = Dr. GRPO)
    std_unbiased: bool = True  # grpo: sample std (n-1) rather than population std (n)
    std_eps: float = 1e-6
    whiten_advantages: bool = False  # zero mean, unit variance over the batch (masked tokens for gae)
    gamma: float = 1.0  # gae
    lam: float = 0.95  # gae
    # policy loss
    loss_type: str = "clipped"  # one of LOSS_TYPES
    clip_eps_low: float = 0.2
    clip_eps_high: float = 0.2
    dual_clip: float | None = None  # c > 1: bound on the loss of negative-advantage tokens
    ratio_level: str = "token"  # "sequence" = GSPO
    aggregation: str = "seq_mean_token_mean"  # one of AGGREGATIONS
    constant_length: int | None = None  # seq_mean_token_sum_norm; None: loop uses max_tokens
    # regularisers
    kl_coef: float = 0.0
    kl_estimator: str = "k3"
    kl_placement: str = "loss"  # "reward": subtract from the reward; "loss": add to the loss
    entropy_coef: float = 0.0
    # value head (gae only)
    value_coef: float = 0.5
    value_clip: float | None = 0.2
    # sample filters (DAPO)
    dynamic_sampling: bool = False  # drop groups whose rewards are all equal
    overlong_filtering: bool = False  # mask out the loss of truncated episodes
    ppo_epochs: int = 1  # passes over one rollout batch

    def __post_init__(self) -> None:
        def fail(msg: str) -> None:
            raise ValueError(f"algorithm {self.name!r}: {msg}")

        for fname, allowed in (
            ("advantage", ADVANTAGES), ("loss_type", LOSS_TYPES), ("ratio_level", RATIO_LEVELS),
            ("aggregation", AGGREGATIONS), ("kl_estimator", KL_ESTIMATORS),
            ("kl_placement", KL_PLACEMENTS),
        ):
            if getattr(self, fname) not in allowed:
                fail(f"{fname}={getattr(self, fname)!r} is not one of {', '.join(allowed)}")
        for fname in ("batch_baseline", "scale_by_std", "std_unbiased", "whiten_advantages",
                      "dynamic_sampling", "overlong_filtering"):
            if not isinstance(getattr(self, fname), bool):
                fail(f"{fname} must be a bool, got {getattr(self, fname)!r}")
        for fname in ("std_eps", "gamma", "lam", "clip_eps_low", "clip_eps_high", "kl_coef",
                      "entropy_coef", "value_coef"):
            v = getattr(self, fname)
            if not (_is_number(v) and v >= 0):
                fail(f"{fname} must be a finite number >= 0, got {v!r}")
        if self.std_eps <= 0:
            fail("std_eps must be > 0")
        if self.gamma > 1 or self.lam > 1:
            fail(f"gamma and lam must be in [0, 1], got {self.gamma}, {self.lam}")
        if self.dual_clip is not None and not (_is_number(self.dual_clip) and self.dual_clip > 1):
            fail(f"dual_clip must be None or a number > 1, got {self.dual_clip!r}")
        if self.value_clip is not None and not (_is_number(self.value_clip) and self.value_clip > 0):
            fail(f"value_clip must be None or a number > 0, got {self.value_clip!r}")
        if self.constant_length is not None and (
            isinstance(self.constant_length, bool) or not isinstance(self.constant_length, int)
            or self.constant_length < 1
        ):
            fail(f"constant_length must be None or a positive int, got {self.constant_length!r}")
        if isinstance(self.ppo_epochs, bool) or not isinstance(self.ppo_epochs, int) or self.ppo_epochs < 1:
            fail(f"ppo_epochs must be an int >= 1, got {self.ppo_epochs!r}")
        if self.ratio_level == "sequence" and self.loss_type != "clipped":
            fail("ratio_level='sequence' (GSPO) needs loss_type='clipped'")
        if self.loss_type == "pg" and self.ppo_epochs != 1:
            fail("loss_type='pg' is on-policy only: ppo_epochs must be 1 (use 'clipped' to reuse samples)")
        if self.loss_type == "pg" and self.dual_clip is not None:
            fail("dual_clip needs loss_type='clipped'")

    @property
    def needs_value_head(self) -> bool:
        return self.advantage == "gae"

    @property
    def needs_reference(self) -> bool:
        return self.kl_coef > 0

    @property
    def kl_in_reward(self) -> bool:
        return self.kl_coef > 0 and self.kl_placement == "reward"

    @property
    def kl_in_loss(self) -> bool:
        return self.kl_coef > 0 and self.kl_placement == "loss"


def _is_number(v: object) -> bool:
    """A finite int or float, not a bool (True would otherwise pass as 1)."""
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)


PRESETS: Mapping[str, AlgoConfig] = MappingProxyType({
    # Williams 1992: on-policy -A * log pi, here with a batch-mean baseline.
    "reinforce": AlgoConfig(
        name="reinforce", advantage="reinforce", batch_baseline=True, loss_type="pg",
        aggregation="token_mean",
    ),
    # Ahmadian et al. 2024 (Back to Basics): leave-one-out baseline, KL (k1) in the reward.
    "rloo": AlgoConfig(
        name="rloo", advantage="rloo", loss_type="clipped", aggregation="seq_mean_token_mean",
        kl_coef=0.05, kl_estimator="k1", kl_placement="reward",
    ),
    # Shao et al. 2024 (DeepSeekMath): group mean/std, eps 0.2, beta 0.04, k3 KL in the loss,
    # per-sequence token-mean.
    "grpo": AlgoConfig(
        name="grpo", advantage="grpo", scale_by_std=True, clip_eps_low=0.2, clip_eps_high=0.2,
        aggregation="seq_mean_token_mean", kl_coef=0.04, kl_estimator="k3", kl_placement="loss",
    ),
    # Liu et al. 2025 (Understanding R1-Zero-like training): no std division, token sums over a
    # constant length (the generation budget; None lets the loop fill in max_tokens), no KL.
    "dr_grpo": AlgoConfig(
        name="dr_grpo", advantage="grpo", scale_by_std=False, aggregation="seq_mean_token_sum_norm",
    ),
    # Yu et al. 2025 (DAPO): clip-higher eps_low 0.2 / eps_high 0.28, token-mean, no KL, dynamic
    # sampling and overlong filtering.
    "dapo": AlgoConfig(
        name="dapo", advantage="grpo", clip_eps_low=0.2, clip_eps_high=0.28,
        aggregation="token_mean", dynamic_sampling=True, overlong_filtering=True,
    ),
    # Zheng et al. 2025 (GSPO): sequence-level length-normalised ratio, eps 3e-4 / 4e-4,
    # sequence-mean, no KL.
    "gspo": AlgoConfig(
        name="gspo", advantage="grpo", ratio_level="sequence", clip_eps_low=3e-4,
        clip_eps_high=4e-4, aggregation="seq_mean_token_mean",
    ),
    # MiniMax-M1 (Chen et al. 2025): clipped, detached IS weight times REINFORCE, token-mean. The
    # paper sets eps_low large (no lower bound: 1.0 lets the weight reach 0) and tunes only
    # eps_high without publishing it; 4.0 is a common open-source default.
    "cispo": AlgoConfig(
        name="cispo", advantage="grpo", loss_type="cispo", clip_eps_low=1.0, clip_eps_high=4.0,
        aggregation="token_mean",
    ),
    # Schulman et al. 2017 / Ouyang et al. 2022: GAE (gamma 1 over tokens, lambda 0.95), whitened
    # advantages, clipped value loss (0.2, coef 0.5), k1 KL in the reward, 4 epochs per rollout.
    "ppo": AlgoConfig(
        name="ppo", advantage="gae", gamma=1.0, lam=0.95, whiten_advantages=True,
        loss_type="clipped", aggregation="token_mean", kl_coef=0.05, kl_estimator="k1",
        kl_placement="reward", value_coef=0.5, value_clip=0.2, ppo_epochs=4,
    ),
})


def get_algorithm(name: str, **overrides) -> AlgoConfig:
    """The named preset (case-insensitive; '-' and '_' alike), with fields overridden and the
    result validated. Unknown names or fields raise ValueError listing the known ones."""
    key = str(name).strip().lower().replace("-", "_")
    if key not in PRESETS:
        raise ValueError(f"unknown algorithm {name!r}; known: {', '.join(sorted(PRESETS))}")
    fields = {f.name for f in dataclasses.fields(AlgoConfig)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(
            f"unknown AlgoConfig field(s) {', '.join(unknown)}; known: {', '.join(sorted(fields))}"
        )
    return dataclasses.replace(PRESETS[key], **overrides)
