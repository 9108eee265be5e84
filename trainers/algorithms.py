"""Named algorithms: the one page that turns a preset into calls of the config-free kernels.

    cfg = get_algorithm("dapo", kl_coef=0.01)   # a preset with overrides, validated
    cfg = resolve(cfg, max_tokens=512)          # lengths that default to the generation budget
    check_settings(cfg, train_config)           # combinations with the run's settings

Here live the presets (`AlgoConfig`, `PRESETS`), and the dispatch the loop calls: advantages
(`sequence_advantages`, `token_advantages`), the policy objective (`compute_policy_loss`), the
group and sample filters (`keep_groups`, `filter_loss_mask`: DAPO's dynamic sampling and
overlong filtering), reward shaping (`shape_rewards`: DAPO's soft overlong penalty), and
`constant_length` resolution. Adding an algorithm touches this file and its test only.

On-policy distillation (`distill`) is a preset too: its advantage `teacher_kl` is per token,
the teacher's logprob minus the student's (`teacher_advantages`), and the reference model slot
holds the teacher (`TrainConfig.teacher`).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from rlvr.trainers.config import ConfigError
from rlvr.trainers.kernels.advantages import (
    distill_advantages,
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
from rlvr.trainers.kernels.aggregation import AGGREGATIONS, as_bool_mask, check_bt, masked_zero, turn_ends
from rlvr.trainers.kernels.kl import KL_ESTIMATORS, kl_estimate
from rlvr.trainers.kernels.policy_loss import (
    LOSS_TYPES,
    RATIO_LEVELS,
    PolicyLossOutput,
    cispo_loss,
    clipped_policy_loss,
    pg_loss,
)

if TYPE_CHECKING:
    from rlvr.trainers.config import TrainConfig

ADVANTAGES = ("reinforce", "rloo", "grpo", "gae", "teacher_kl")
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
    gamma: float = 1.0  # gae; teacher_kl: the discount over later tokens (0: each token's own KL)
    lam: float = 0.95  # gae
    # policy loss
    loss_type: str = "clipped"  # one of LOSS_TYPES
    clip_eps_low: float = 0.2
    clip_eps_high: float = 0.2
    dual_clip: float | None = None  # c > 1: bound on the loss of negative-advantage tokens
    ratio_level: str = "token"  # "sequence" = GSPO
    aggregation: str = "seq_mean_token_mean"  # one of AGGREGATIONS
    constant_length: int | None = None  # seq_mean_token_sum_norm; None: `resolve` uses max_tokens
    # regularisers
    kl_coef: float = 0.0
    kl_estimator: str = "k3"
    kl_placement: str = "loss"  # "reward": subtract from the reward; "loss": add to the loss
    entropy_coef: float = 0.0
    # value head (gae only)
    value_coef: float = 0.5
    value_clip: float | None = 0.2
    # sample filters and length shaping (DAPO)
    dynamic_sampling: bool = False  # drop groups whose rewards are all equal ...
    max_refill_rounds: int = 4  # ... and sample up to this many more rounds to refill the batch
    overlong_filtering: bool = False  # mask out the loss of truncated episodes
    overlong_buffer_frac: float = 0.0  # soft overlong penalty over the last frac of the budget (0: off)
    overlong_max_length: int | None = None  # the budget L_max per turn; None: `resolve` uses max_tokens
    overlong_penalty_factor: float = 1.0  # the penalty at L_max
    ppo_epochs: int = 1  # passes over one rollout batch

    def __post_init__(self) -> None:
        def fail(msg: str) -> None:
            raise ValueError(f"algorithm {self.name!r}: {msg}")

        for fname, allowed in (
            ("advantage", ADVANTAGES),
            ("loss_type", LOSS_TYPES),
            ("ratio_level", RATIO_LEVELS),
            ("aggregation", AGGREGATIONS),
            ("kl_estimator", KL_ESTIMATORS),
            ("kl_placement", KL_PLACEMENTS),
        ):
            if getattr(self, fname) not in allowed:
                fail(f"{fname}={getattr(self, fname)!r} is not one of {', '.join(allowed)}")
        for fname in (
            "batch_baseline",
            "scale_by_std",
            "std_unbiased",
            "whiten_advantages",
            "dynamic_sampling",
            "overlong_filtering",
        ):
            if not isinstance(getattr(self, fname), bool):
                fail(f"{fname} must be a bool, got {getattr(self, fname)!r}")
        for fname in (
            "std_eps",
            "gamma",
            "lam",
            "clip_eps_low",
            "clip_eps_high",
            "kl_coef",
            "entropy_coef",
            "value_coef",
            "overlong_buffer_frac",
            "overlong_penalty_factor",
        ):
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
        for fname in ("constant_length", "overlong_max_length"):
            v = getattr(self, fname)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                fail(f"{fname} must be None or a positive int, got {v!r}")
        if isinstance(self.ppo_epochs, bool) or not isinstance(self.ppo_epochs, int) or self.ppo_epochs < 1:
            fail(f"ppo_epochs must be an int >= 1, got {self.ppo_epochs!r}")
        if (
            isinstance(self.max_refill_rounds, bool)
            or not isinstance(self.max_refill_rounds, int)
            or self.max_refill_rounds < 0
        ):
            fail(f"max_refill_rounds must be an int >= 0, got {self.max_refill_rounds!r}")
        if self.overlong_buffer_frac > 1:
            fail(f"overlong_buffer_frac must be in [0, 1], got {self.overlong_buffer_frac}")
        if self.ratio_level == "sequence" and self.loss_type != "clipped":
            fail("ratio_level='sequence' (GSPO) needs loss_type='clipped'")
        if self.loss_type == "pg" and self.ppo_epochs != 1:
            fail("loss_type='pg' is on-policy only: ppo_epochs must be 1 (use 'clipped' to reuse samples)")
        if self.loss_type == "pg" and self.dual_clip is not None:
            fail("dual_clip needs loss_type='clipped'")
        if self.needs_teacher and self.kl_in_reward:
            fail(
                "advantage 'teacher_kl' is already the reverse KL to the teacher (the reference model): "
                "kl_placement='reward' would count it twice; use kl_coef 0, or kl_placement 'loss'"
            )
        if self.kl_in_loss and self.kl_estimator == "k1":
            # d k1 = grad log pi, whose expectation on samples of pi is 0: no pull toward the reference
            warnings.warn(
                f"algorithm {self.name!r}: kl_estimator 'k1' with kl_placement 'loss' has zero "
                "expected gradient (E[grad log pi] = 0), so it does not regularise toward the "
                "reference; use 'k3' or 'k2' in the loss, or put k1 in the reward",
                stacklevel=3,
            )

    @property
    def needs_value_head(self) -> bool:
        return self.advantage == "gae"

    @property
    def needs_teacher(self) -> bool:
        """On-policy distillation: the reference model is the teacher, and the advantages need the
        student's logprobs before the update."""
        return self.advantage == "teacher_kl"

    @property
    def needs_reference(self) -> bool:
        return self.kl_coef > 0 or self.needs_teacher

    @property
    def kl_in_reward(self) -> bool:
        return self.kl_coef > 0 and self.kl_placement == "reward"

    @property
    def kl_in_loss(self) -> bool:
        return self.kl_coef > 0 and self.kl_placement == "loss"


def _is_number(v: object) -> bool:
    """A finite int or float, not a bool (True would otherwise pass as 1)."""
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)


PRESETS: Mapping[str, AlgoConfig] = MappingProxyType(
    {
        # Williams 1992: on-policy -A * log pi, here with a batch-mean baseline.
        "reinforce": AlgoConfig(
            name="reinforce",
            advantage="reinforce",
            batch_baseline=True,
            loss_type="pg",
            aggregation="token_mean",
        ),
        # Ahmadian et al. 2024 (Back to Basics): leave-one-out baseline, KL (k1) in the reward. The
        # whole completion is one action: its loss is the sum over its tokens (TRL: the summed sequence
        # log-prob), not divided by its length; aggregation="seq_mean_token_mean" normalises by length.
        "rloo": AlgoConfig(
            name="rloo",
            advantage="rloo",
            loss_type="clipped",
            aggregation="seq_mean_token_sum",
            kl_coef=0.05,
            kl_estimator="k1",
            kl_placement="reward",
        ),
        # Shao et al. 2024 (DeepSeekMath): group mean/std, eps 0.2, beta 0.04, k3 KL in the loss,
        # per-sequence token-mean.
        "grpo": AlgoConfig(
            name="grpo",
            advantage="grpo",
            scale_by_std=True,
            clip_eps_low=0.2,
            clip_eps_high=0.2,
            aggregation="seq_mean_token_mean",
            kl_coef=0.04,
            kl_estimator="k3",
            kl_placement="loss",
        ),
        # Liu et al. 2025 (Understanding R1-Zero-like training): no std division, token sums over a
        # constant length (the generation budget; None lets the loop fill in max_tokens), no KL.
        "dr_grpo": AlgoConfig(
            name="dr_grpo",
            advantage="grpo",
            scale_by_std=False,
            aggregation="seq_mean_token_sum_norm",
        ),
        # Yu et al. 2025 (DAPO): clip-higher eps_low 0.2 / eps_high 0.28, token-mean, no KL, dynamic
        # sampling (refilled, as verl's recipe), overlong filtering, and the soft overlong penalty over
        # the last 20% of the budget (the paper: 4096 of 20480 tokens).
        "dapo": AlgoConfig(
            name="dapo",
            advantage="grpo",
            clip_eps_low=0.2,
            clip_eps_high=0.28,
            aggregation="token_mean",
            dynamic_sampling=True,
            overlong_filtering=True,
            overlong_buffer_frac=0.2,
        ),
        # Zheng et al. 2025 (GSPO): sequence-level length-normalised ratio, eps 3e-4 / 4e-4,
        # sequence-mean, no KL.
        "gspo": AlgoConfig(
            name="gspo",
            advantage="grpo",
            ratio_level="sequence",
            clip_eps_low=3e-4,
            clip_eps_high=4e-4,
            aggregation="seq_mean_token_mean",
        ),
        # MiniMax-M1 (Chen et al. 2025): clipped, detached IS weight times REINFORCE, token-mean. The
        # paper sets eps_low large (no lower bound: 1.0 lets the weight reach 0) and tunes only
        # eps_high without publishing it; 4.0 is a common open-source default.
        "cispo": AlgoConfig(
            name="cispo",
            advantage="grpo",
            loss_type="cispo",
            clip_eps_low=1.0,
            clip_eps_high=4.0,
            aggregation="token_mean",
        ),
        # Schulman et al. 2017 / Ouyang et al. 2022: GAE (gamma 1 over tokens, lambda 0.95), whitened
        # advantages, clipped value loss (0.2, coef 0.5), k1 KL in the reward, 4 epochs per rollout.
        "ppo": AlgoConfig(
            name="ppo",
            advantage="gae",
            gamma=1.0,
            lam=0.95,
            whiten_advantages=True,
            loss_type="clipped",
            aggregation="token_mean",
            kl_coef=0.05,
            kl_estimator="k1",
            kl_placement="reward",
            value_coef=0.5,
            value_clip=0.2,
            ppo_epochs=4,
        ),
        # On-policy distillation (Agarwal et al. 2024, GKD; Thinking Machines 2025, "On-Policy
        # Distillation"): the student samples, the teacher (--teacher, in the reference model's slot)
        # scores the student's tokens, and each token's advantage is log pi_teacher - log pi_student
        # (minus the reverse-KL estimate k1; gamma 0: no credit from later tokens). The loss is the
        # importance-weighted policy gradient (the clipped one: ratio 1 on fresh samples), token-mean;
        # no KL term (the advantage is the KL). The environment's reward is logged, not trained on.
        "distill": AlgoConfig(
            name="distill",
            advantage="teacher_kl",
            gamma=0.0,
            loss_type="clipped",
            aggregation="token_mean",
        ),
    }
)


def get_algorithm(name: str, **overrides) -> AlgoConfig:
    """The named preset (case-insensitive; '-' and '_' alike), with fields overridden and the
    result validated. Unknown names or fields raise ValueError listing the known ones."""
    key = str(name).strip().lower().replace("-", "_")
    if key not in PRESETS:
        raise ValueError(f"unknown algorithm {name!r}; known: {', '.join(sorted(PRESETS))}")
    fields = {f.name for f in dataclasses.fields(AlgoConfig)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(f"unknown AlgoConfig field(s) {', '.join(unknown)}; known: {', '.join(sorted(fields))}")
    return dataclasses.replace(PRESETS[key], **overrides)


# --- what the loop calls ---------------------------------------------------------------------


def resolve(algo: AlgoConfig, max_tokens: int) -> AlgoConfig:
    """Lengths left to the run: Dr. GRPO's `constant_length` and the overlong penalty's
    `overlong_max_length` default to the generation budget `max_tokens`."""
    changes = {}
    if algo.aggregation == "seq_mean_token_sum_norm" and algo.constant_length is None:
        changes["constant_length"] = max_tokens
    if algo.overlong_buffer_frac > 0 and algo.overlong_max_length is None:
        changes["overlong_max_length"] = max_tokens
    return dataclasses.replace(algo, **changes) if changes else algo


def check_settings(algo: AlgoConfig, cfg: TrainConfig) -> None:
    """Combinations of the preset with the run's settings that cannot work; `ConfigError`."""
    epochs = cfg.epochs or algo.ppo_epochs
    if algo.loss_type == "pg" and (epochs > 1 or cfg.num_minibatches > 1):
        raise ConfigError(
            f"algorithm {algo.name!r} uses loss_type 'pg' (REINFORCE: no importance ratio, no clip), "
            f"which is only correct on fresh samples: it needs epochs 1 and minibatch_size equal to the "
            f"batch ({cfg.batch_size} episodes), got epochs {epochs} and minibatch_size "
            f"{cfg.minibatch_size or cfg.batch_size}; to reuse samples, set algo_args loss_type: clipped"
        )
    if algo.needs_teacher and not cfg.teacher:
        raise ConfigError(
            f"algorithm {algo.name!r} distills from a teacher: set teacher (--teacher DIR), the model "
            f"directory whose logprobs of the student's tokens are the reward"
        )
    if cfg.teacher and not algo.needs_teacher:
        raise ConfigError(
            f"teacher {cfg.teacher!r} is set, but algorithm {algo.name!r} does not use one: use "
            f"--algo distill (or algo_args advantage: teacher_kl), or leave teacher unset"
        )
    if cfg.decoupled and cfg.top_p < 1:
        raise ConfigError(
            f"old_logprobs 'sampler' (or max_staleness > 0) weights each token by pi_old / pi_sampler, which is "
            f"biased when the sampler draws from a top_p-truncated distribution: use top_p 1 (got {cfg.top_p}) "
            f"or old_logprobs 'recompute' with max_staleness 0"
        )


def keep_groups(algo: AlgoConfig, rewards_B: Tensor, group_ids_B: Tensor) -> Tensor:
    """Per episode, whether its group trains: all do, or (dynamic sampling) those whose rewards
    differ. Run on the verifier's rewards, before any shaping (DAPO filters on accuracy)."""
    if not algo.dynamic_sampling or rewards_B.numel() == 0:
        return torch.ones(rewards_B.shape, dtype=torch.bool)
    return dynamic_sampling_keep(rewards_B, group_ids_B)


def filter_loss_mask(algo: AlgoConfig, loss_mask_BT: Tensor, truncated_B: Tensor) -> Tensor:
    """Overlong filtering: truncated episodes take no part in the loss."""
    return overlong_filter(loss_mask_BT, truncated_B) if algo.overlong_filtering else loss_mask_BT


def shape_rewards(
    algo: AlgoConfig, rewards_B: Tensor, turn_rewards_BT: Tensor, loss_mask_BT: Tensor
) -> tuple[Tensor, Tensor]:
    """DAPO's soft overlong penalty, per model turn (each turn has its own `max_tokens` budget;
    a single-turn episode is DAPO's case exactly): added to the turn's reward on its last model
    token, and to the episode's total. Needs `resolve`d `overlong_max_length`. Pass the mask
    before overlong filtering: lengths are what the model generated."""
    if algo.overlong_buffer_frac == 0:
        return rewards_B, turn_rewards_BT
    if algo.overlong_max_length is None:
        raise ValueError(f"{algo.name}: the overlong penalty needs overlong_max_length (call resolve)")
    check_bt("turn_rewards", turn_rewards_BT, loss_mask_BT)
    ends_BT, lengths_BT = turn_ends(loss_mask_BT)
    L = algo.overlong_max_length
    penalty_BT = overlong_penalty(lengths_BT, L, algo.overlong_buffer_frac * L, algo.overlong_penalty_factor)
    penalty_BT = torch.where(ends_BT, penalty_BT.to(turn_rewards_BT.dtype), torch.zeros_like(turn_rewards_BT))
    return rewards_B + penalty_BT.sum(dim=1).to(rewards_B.dtype), turn_rewards_BT + penalty_BT


def sequence_advantages(
    algo: AlgoConfig, rewards_B: Tensor, group_ids_B: Tensor | None = None, episode_ids_B: Tensor | None = None
) -> Tensor:
    """The preset's sequence-level estimator, then whitening if asked. Returns `(B,)`.
    Rewards may also be `(num_groups, G)` without ids. For ``gae`` use `token_advantages`.
    `episode_ids_B`: rows with one id are segments of one agent episode, counted once
    (`trainers.kernels.advantages.episode_rows`: each gets its first row's advantage)."""
    if episode_ids_B is not None and group_ids_B is not None:
        first_B, index_B = episode_rows(episode_ids_B)
        if not bool(first_B.all()):
            return sequence_advantages(algo, rewards_B[first_B], group_ids_B[first_B])[index_B]
    if algo.advantage == "reinforce":
        advantages_B = reinforce_advantages(rewards_B, baseline=algo.batch_baseline)
    elif algo.advantage == "rloo":
        advantages_B = rloo_advantages(rewards_B, group_ids_B)
    elif algo.advantage == "grpo":
        advantages_B = grpo_advantages(rewards_B, group_ids_B, algo.scale_by_std, algo.std_unbiased, algo.std_eps)
    else:
        raise ValueError(f"advantage {algo.advantage!r} is token-level: use token_advantages or teacher_advantages")
    return whiten(advantages_B) if algo.whiten_advantages else advantages_B


def token_advantages(algo: AlgoConfig, rewards_BT: Tensor, values_BT: Tensor, mask_BT: Tensor) -> tuple[Tensor, Tensor]:
    """PPO's advantages: `gae` with the preset's gamma/lambda over per-token rewards (each turn's
    on its last model token), whitened over the masked tokens if asked (the returns, the value
    targets, never are). Returns `(advantages_BT, returns_BT)`."""
    advantages_BT, returns_BT = gae(rewards_BT, values_BT, mask_BT, algo.gamma, algo.lam)
    return (whiten(advantages_BT, mask_BT) if algo.whiten_advantages else advantages_BT), returns_BT


def teacher_advantages(
    algo: AlgoConfig, student_logprobs_BT: Tensor, teacher_logprobs_BT: Tensor, mask_BT: Tensor
) -> Tensor:
    """On-policy distillation's advantages (`teacher_kl`): per token, the teacher's logprob minus
    the student's, summed over later model tokens with the preset's `gamma` (0: the token's own;
    formulas in `trainers.kernels.advantages.distill_advantages`), whitened over the masked tokens if
    asked. The student's logprobs are those of the weights that sampled (before the update).
    Returns `(B, T)`."""
    advantages_BT = distill_advantages(student_logprobs_BT, teacher_logprobs_BT, mask_BT, algo.gamma)
    return whiten(advantages_BT, mask_BT) if algo.whiten_advantages else advantages_BT


def compute_policy_loss(
    algo: AlgoConfig,
    logprobs_BT: Tensor,
    old_logprobs_BT: Tensor | None,
    advantages: Tensor,
    mask_BT: Tensor,
    ref_logprobs_BT: Tensor | None = None,
    entropy_BT: Tensor | None = None,
    is_weights_BT: Tensor | None = None,
) -> PolicyLossOutput:
    """The preset's whole per-token policy objective: its policy loss (times `is_weights_BT`,
    the rollout correction's, when given), plus `kl_coef * KL` when the KL goes in the loss (needs
    `ref_logprobs_BT`), minus `entropy_coef * entropy` (needs `entropy_BT` when the coef is set).
    `advantages` is `(B,)` or `(B, T)`. Reduce the result's `loss` with
    `aggregate_loss(..., algo.aggregation, ..., algo.constant_length)`."""
    if algo.loss_type == "clipped":
        out = clipped_policy_loss(
            logprobs_BT,
            old_logprobs_BT,
            advantages,
            mask_BT,
            algo.clip_eps_low,
            algo.clip_eps_high,
            algo.dual_clip,
            algo.ratio_level,
        )
    elif algo.loss_type == "cispo":
        out = cispo_loss(logprobs_BT, old_logprobs_BT, advantages, mask_BT, algo.clip_eps_low, algo.clip_eps_high)
    else:
        out = pg_loss(logprobs_BT, advantages, mask_BT)
    loss_BT, m = out.loss, as_bool_mask(mask_BT)
    if is_weights_BT is not None:
        check_bt("is_weights", is_weights_BT, logprobs_BT)
        loss_BT = loss_BT * is_weights_BT.detach().to(loss_BT.dtype)
    if algo.kl_in_loss:
        if ref_logprobs_BT is None:
            raise ValueError(f"{algo.name}: kl_placement='loss' with kl_coef > 0 needs ref_logprobs")
        kl_BT = kl_estimate(logprobs_BT.to(loss_BT.dtype), ref_logprobs_BT.to(loss_BT.dtype), m, algo.kl_estimator)
        loss_BT = loss_BT + algo.kl_coef * kl_BT
    if algo.entropy_coef > 0:
        if entropy_BT is None:
            raise ValueError(f"{algo.name}: entropy_coef > 0 needs the per-token entropy")
        check_bt("entropy", entropy_BT, logprobs_BT)
        loss_BT = loss_BT - algo.entropy_coef * entropy_BT.to(loss_BT.dtype)
    out.loss = masked_zero(loss_BT, m)
    return out
