"""Named algorithms: the one page of what each algorithm is.

    cfg = get_algorithm("dapo", kl_coef=0.01)   # a preset with overrides, validated
    cfg = resolve(cfg, max_tokens=512)          # lengths that default to the generation budget

Here live the advantage estimators and what each one is (`ESTIMATORS`: group-relative or not, which
the pre-flight group-size check and the zero-signal rule read), the presets (`AlgoConfig`,
`PRESETS`), `constant_length` resolution, and `--algo`'s description generated from the presets
(`preset_help`). The calls a preset makes of the config-free kernels (advantages, the policy
objective, DAPO's filters and reward shaping) are `trainers.dispatch`; the checks of a preset against
a run's settings are `trainers.preflight.check_settings`. This page imports neither torch nor the
settings (`trainers.config` reads it for `--algo`'s description). Adding an algorithm is a preset
here, and a branch in `trainers.dispatch` when it calls a kernel no preset called before.

On-policy distillation (`distill`) is a preset too: its advantage `teacher_kl` is per token,
the teacher's logprob minus the student's (`trainers.dispatch.teacher_advantages`), and the
reference model slot holds the teacher (`TrainConfig.teacher`).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from rlvr.trainers.kernels.names import AGGREGATIONS, KL_ESTIMATORS, LOSS_TYPES, RATIO_LEVELS


@dataclass(frozen=True)
class Estimator:
    """What an advantage estimator is, as the run's checks need to know it (the estimator's maths:
    `trainers.kernels.advantages`, called by `trainers.dispatch`)."""

    # Compares the samples of each task's group with each other: a run needs group_size >= 2
    # (`trainers.preflight`), and a group whose rewards are all equal carries no signal
    # (`trainers.zero_signal`).
    group_relative: bool


ESTIMATORS: Mapping[str, Estimator] = MappingProxyType(
    {
        "reinforce": Estimator(group_relative=False),  # the reward, less the batch mean (batch_baseline) or nothing
        "rloo": Estimator(group_relative=True),  # less the mean of the group's other samples
        "grpo": Estimator(group_relative=True),  # less the group's mean (and over its std)
        "gae": Estimator(group_relative=False),  # per token, from the value head's or critic's values
        "teacher_kl": Estimator(group_relative=False),  # per token, the teacher's logprob less the student's
    }
)
KL_PLACEMENTS = ("reward", "loss")


@dataclass(frozen=True)
class AlgoConfig:
    name: str = "custom"
    # advantages
    advantage: str = "grpo"  # a key of ESTIMATORS
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
            ("advantage", tuple(ESTIMATORS)),
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
    def group_relative(self) -> bool:
        """Its advantages compare the samples of each task's group (`Estimator.group_relative`)."""
        return ESTIMATORS[self.advantage].group_relative

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


def resolve(algo: AlgoConfig, max_tokens: int) -> AlgoConfig:
    """Lengths left to the run: Dr. GRPO's `constant_length` and the overlong penalty's
    `overlong_max_length` default to the generation budget `max_tokens`."""
    changes = {}
    if algo.aggregation == "seq_mean_token_sum_norm" and algo.constant_length is None:
        changes["constant_length"] = max_tokens
    if algo.overlong_buffer_frac > 0 and algo.overlong_max_length is None:
        changes["overlong_max_length"] = max_tokens
    return dataclasses.replace(algo, **changes) if changes else algo


def preset_help() -> str:
    """`--algo`'s description (`TrainConfig.algo`), generated from `PRESETS`: every preset by name,
    one that distills saying that it needs --teacher."""
    names = [f"{n} (on-policy distillation from --teacher)" if p.needs_teacher else n for n, p in PRESETS.items()]
    return f"algorithm preset: {', '.join(names[:-1])} or {names[-1]}"
