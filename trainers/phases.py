"""The maths of a training step's phases, as functions of their inputs (the `Trainer` in
`trainers.loop` calls them in order; tests call them on their own):

- `old_and_ref_logprobs`: the trainer's logprobs before the update (and the sampler/trainer gap),
  the value head's values, the reference model's logprobs, the rollout-correction weights; when
  `update_is_on_policy`, the update's own first forward stands in for the first of these;
- `compute_advantages`: sequence-level or GAE advantages, KL in the reward if asked; on-policy
  distillation's per-token teacher-minus-student logprobs (which need the student's old logprobs
  before the update: distillation takes the separate no-grad forward, never the fused path);
- `accumulate_gradients`: one minibatch's loss, backwarded micro-batch by micro-batch with the
  minibatch's (global) denominators.

Data flows by return values: `StepTensors` and `Advantages` are frozen, and no phase changes a
`Batch` it was given (a phase that changes the loss mask returns a new batch, `dataclasses.replace`).
Why: the same tensors go to every data-parallel rank and into every epoch; a phase that rewrote its
input in place would make a step's numbers depend on the order in which phases and tests call them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from rlvr.trainers.algorithms import AlgoConfig
from rlvr.trainers.batch import Batch
from rlvr.trainers.config import TrainConfig
from rlvr.trainers.dispatch import compute_policy_loss, sequence_advantages, teacher_advantages, token_advantages
from rlvr.trainers.kernels.aggregation import aggregate_loss, loss_denominator, masked_mean
from rlvr.trainers.kernels.kl import kl_estimate, kl_penalized_rewards
from rlvr.trainers.kernels.rollout_correction import correction_weights
from rlvr.trainers.kernels.value_loss import value_loss
from rlvr.trainers.model_set import Models
from rlvr.trainers.packing import micro_batch, split_rows
from rlvr.trainers.policy import forward


@dataclass
class PreUpdateSums:
    """Sums over (micro-)batches of what is measured on the weights that sampled."""

    batches: int = 0  # (micro-)batches added
    tokens: float = 0.0
    gap_sum: float = 0.0  # |trainer - sampler| logprob
    gap_max: float = 0.0
    entropy_sum: float = 0.0
    # k3 whatever estimator the loss or reward uses: the logged `kl` is >= 0 (k1's mean can show
    # below 0 on a step's few tokens, which reads as a bug), and still unbiased for KL(pi || pi_ref)
    kl_sum: float | None = None  # None: no reference model

    def add(
        self,
        logprobs_BT: torch.Tensor,
        entropy_BT: torch.Tensor,
        batch: Batch,
        ref_logprobs_BT: torch.Tensor | None,
    ) -> None:
        mask = batch.loss_mask
        gap = (logprobs_BT - batch.sampler_logprobs).abs() * mask
        self.batches += 1
        self.tokens += float(mask.sum())
        self.gap_sum += float(gap.sum())
        self.gap_max = max(self.gap_max, float(gap.max()) if mask.any() else 0.0)
        self.entropy_sum += float((entropy_BT * mask).sum())
        if ref_logprobs_BT is not None:
            kl = kl_estimate(logprobs_BT, ref_logprobs_BT, mask, "k3")
            self.kl_sum = (self.kl_sum or 0.0) + float((kl * mask).sum())

    def stats(self) -> dict[str, float]:
        """The step's metrics (empty when nothing was added)."""
        if self.batches == 0:
            return {}
        tokens = max(self.tokens, 1.0)
        stats = {
            "logprob_gap_max": self.gap_max,
            "logprob_gap_mean": self.gap_sum / tokens,
            "entropy": self.entropy_sum / tokens,
        }
        if self.kl_sum is not None:
            stats["kl"] = self.kl_sum / tokens
        return stats


@dataclass
class UpdateSums:
    """Sums over the micro-batches of one step's update, for its metrics."""

    tokens: float = 0.0
    clipped: float = 0.0  # tokens whose gradient the clip cut (or whose weight it capped)
    approx_kl: float = 0.0  # k3 of KL(pi_old || pi) summed over tokens: how far the update moved
    policy_loss: float = 0.0  # summed over optimizer steps
    value_loss: float = 0.0
    value_clipped: float = 0.0
    pre: PreUpdateSums = field(default_factory=PreUpdateSums)  # on-policy: from the update's forward


@dataclass(frozen=True)
class Advantages:
    """What `compute_advantages` gives: the advantages, GAE's returns, and their metrics."""

    advantages: torch.Tensor  # (B,) sequence-level, or (B, T) per token (GAE, distillation)
    returns_BT: torch.Tensor | None = None  # GAE's value targets only
    stats: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class StepTensors:
    """Everything the update needs, computed once per step before any weight changes. Frozen:
    derive a changed copy with `dataclasses.replace` (or `with_advantages`)."""

    batch: Batch
    old_logprobs_BT: torch.Tensor | None  # None: the update's own forward gives them (`update_is_on_policy`)
    ref_logprobs_BT: torch.Tensor | None = None
    old_values_BT: torch.Tensor | None = None
    advantages: torch.Tensor | None = None  # (B,) or (B, T): `Advantages.advantages`
    returns_BT: torch.Tensor | None = None  # GAE only
    is_weights_BT: torch.Tensor | None = None  # rollout correction (old_logprobs sampler) only
    stats: Mapping[str, float] = field(default_factory=dict)  # the step's metrics so far

    def with_advantages(self, adv: Advantages) -> StepTensors:
        """These tensors with `adv`'s advantages and returns, and its metrics added."""
        return dataclasses.replace(
            self, advantages=adv.advantages, returns_BT=adv.returns_BT, stats={**self.stats, **adv.stats}
        )

    def with_stats(self, stats: Mapping[str, float]) -> StepTensors:
        """These tensors with `stats` added to their metrics."""
        return dataclasses.replace(self, stats={**self.stats, **stats})


def update_is_on_policy(models: Models, algo: AlgoConfig, cfg: TrainConfig) -> bool:
    """Whether the update's own forward passes see the weights that sampled: one epoch of one
    minibatch (the optimizer steps once, after every forward), old logprobs recomputed, and
    nothing before the update that needs them (KL in the reward, values for GAE, distillation's
    advantages: the teacher's logprob minus the student's). Then a
    separate no-grad forward would only repeat the update's: it is skipped, and the update's
    logprobs, detached, are the old logprobs (ratio 1; TRL and verl do the same)."""
    return (
        (cfg.epochs or algo.ppo_epochs) == 1
        and cfg.num_minibatches == 1
        and not cfg.decoupled
        and not algo.kl_in_reward
        and not algo.needs_teacher
        and not models.wants_values
    )


@torch.no_grad()
def old_and_ref_logprobs(models: Models, algo: AlgoConfig, cfg: TrainConfig, batch: Batch) -> StepTensors:
    """Trainer logprobs before the update, the reference model's, and the rollout-correction
    weights (`trainers.kernels.rollout_correction`; a masking mode also takes tokens out of the loss mask
    of the returned tensors' batch, a copy: `batch` itself is left as it is). The
    sampler holds the same weights right now (synced after the last step), so the difference
    between its logprobs and these is the sync gap, measured on this step's tokens. When
    `update_is_on_policy`, `old_logprobs` is left None and `accumulate_gradients` measures
    the gap, entropy and KL from the update's forward instead."""
    if update_is_on_policy(models, algo, cfg):
        return StepTensors(batch=batch, old_logprobs_BT=None, ref_logprobs_BT=reference_logprobs(models, cfg, batch))

    def policy(mb: Batch):
        out = forward(models.policy, mb, cfg.temperature, with_entropy=True, value_head=models.value_head)
        return out.logprobs, out.entropy, out.values

    old, entropy, values = per_micro_batch(batch, cfg.micro_batch, policy, cfg.micro_batch_tokens)
    ref = reference_logprobs(models, cfg, batch)
    sums = PreUpdateSums()
    sums.add(old, entropy, batch, ref)
    t = StepTensors(batch=batch, old_logprobs_BT=old, old_values_BT=values, ref_logprobs_BT=ref, stats=sums.stats())
    if not cfg.decoupled:
        return t
    c = correction_weights(old, batch.sampler_logprobs, batch.loss_mask, cfg.rollout_correction, cfg.tis_cap)
    kept = dataclasses.replace(batch, loss_mask=batch.loss_mask * c.keep.to(batch.loss_mask.dtype))  # masked IS
    return dataclasses.replace(t, batch=kept, is_weights_BT=c.weights).with_stats(c.stats)


def reference_logprobs(models: Models, cfg: TrainConfig, batch: Batch) -> torch.Tensor | None:
    """The frozen reference model's logprobs of the batch (None without a reference); with LoRA the
    reference is the policy with its adapter off (`Models.reference_model`)."""
    with models.reference_model() as reference:
        if reference is None:
            return None
        (ref,) = per_micro_batch(
            batch,
            cfg.micro_batch,
            lambda mb: (forward(reference, mb, cfg.temperature).logprobs,),
            cfg.micro_batch_tokens,
        )
    return ref


def compute_advantages(algo: AlgoConfig, t: StepTensors) -> Advantages:
    """Sequence-level (REINFORCE, RLOO, GRPO: the episode's total reward) or token-level (GAE:
    turn k's reward on turn k's last model token, so a token is credited with the rewards of its
    own and later turns only) advantages, with the KL penalty in the reward when the preset says
    so. Rows without model tokens (e.g. removed by overlong filtering) get no reward in GAE.
    On-policy distillation (`teacher_kl`): per token, the teacher's (reference slot) logprob minus
    the student's before the update; the environment's reward is not used (only logged).
    Returns them (`t.with_advantages` puts them into the step's tensors); `t` is left as it is."""
    batch, mask_BT = t.batch, t.batch.loss_mask
    if algo.needs_teacher:
        if t.old_logprobs_BT is None or t.ref_logprobs_BT is None:
            raise ValueError(f"{algo.name}: distillation needs the student's old logprobs and the teacher's")
        advantages_BT = teacher_advantages(algo, t.old_logprobs_BT, t.ref_logprobs_BT, mask_BT)
        # k1 of KL(student || teacher), mean over the step's model tokens: what distillation lowers
        return Advantages(
            advantages_BT,
            stats={
                "teacher_kl": float(masked_mean(t.old_logprobs_BT - t.ref_logprobs_BT, mask_BT)),
                "advantage_abs_mean": float(masked_mean(advantages_BT.abs(), mask_BT)),
            },
        )
    kl_BT = kl_estimate(t.old_logprobs_BT, t.ref_logprobs_BT, mask_BT, algo.kl_estimator) if algo.kl_in_reward else None
    if algo.advantage != "gae":
        rewards_B = batch.rewards
        if kl_BT is not None:
            rewards_B = kl_penalized_rewards(rewards_B, kl_BT, mask_BT, algo.kl_coef)
        advantages_B = sequence_advantages(algo, rewards_B, batch.group_ids, batch.episode_ids)
        return Advantages(advantages_B, stats={"advantage_abs_mean": float(advantages_B.abs().mean())})
    has_tokens_B = (mask_BT > 0).any(dim=1, keepdim=True)
    rewards_BT = torch.where(has_tokens_B, batch.turn_rewards, torch.zeros_like(batch.turn_rewards))
    if kl_BT is not None:
        rewards_BT = kl_penalized_rewards(rewards_BT, kl_BT, mask_BT, algo.kl_coef)
    advantages_BT, returns_BT = token_advantages(algo, rewards_BT, t.old_values_BT, mask_BT)
    stats = {"advantage_abs_mean": float(masked_mean(advantages_BT.abs(), mask_BT))}
    return Advantages(advantages_BT, returns_BT, stats)


def accumulate_gradients(
    models: Models,
    algo: AlgoConfig,
    cfg: TrainConfig,
    t: StepTensors,
    rows: torch.Tensor,
    sums: UpdateSums,
    denominator_rows: torch.Tensor | None = None,
) -> None:
    """Backward the loss of minibatch `rows`, micro-batch by micro-batch. The denominators are
    the whole minibatch's, so the summed gradient equals one backward over the minibatch.
    Micro-batches are `cfg.micro_batch` rows, or with `micro_batch_tokens` padding-free packed
    forwards (`trainers.packing`). Without `t.old_logprobs_BT` (on-policy), the forward's detached
    logprobs are the old ones. `denominator_rows` (default `rows`): the minibatch whose
    denominators to use, when `rows` is a data-parallel rank's share of it."""
    fused = t.old_logprobs_BT is None
    mask = t.batch.loss_mask[rows if denominator_rows is None else denominator_rows]
    policy_denom = loss_denominator(mask, algo.aggregation)
    value_denom = loss_denominator(mask, "token_mean")
    packed = cfg.micro_batch_tokens is not None
    for micro in split_rows(t.batch, rows, cfg.micro_batch, cfg.micro_batch_tokens):
        mb = micro_batch(t.batch, micro, packed)
        width = mb.completion_len

        def pick(x, micro=micro, width=width):
            return None if x is None else (x[micro] if x.dim() == 1 else x[micro, :width])

        out = forward(
            models.policy,
            mb,
            cfg.temperature,
            with_entropy=algo.entropy_coef > 0 or fused,
            value_head=models.value_head,
        )
        old = out.logprobs.detach() if fused else pick(t.old_logprobs_BT)
        if fused:
            sums.pre.add(old, out.entropy.detach(), mb, pick(t.ref_logprobs_BT))
        pl = compute_policy_loss(
            algo,
            out.logprobs,
            old,
            pick(t.advantages),
            mb.loss_mask,
            ref_logprobs_BT=pick(t.ref_logprobs_BT),
            entropy_BT=out.entropy,
            is_weights_BT=pick(t.is_weights_BT),
        )
        loss = aggregate_loss(pl.loss, mb.loss_mask, algo.aggregation, policy_denom, algo.constant_length)
        m = mb.loss_mask > 0
        sums.policy_loss += float(loss.detach())
        if models.wants_values:
            values = out.values if models.critic is None else models.critic(mb)
            vl = value_loss(values, pick(t.old_values_BT), pick(t.returns_BT), mb.loss_mask, algo.value_clip)
            v = aggregate_loss(vl.loss, mb.loss_mask, "token_mean", value_denom)
            loss = loss + algo.value_coef * v
            sums.value_loss += float(v.detach())
            sums.value_clipped += float((vl.clipped & m).sum())
        loss.backward()
        r = pl.ratio.detach()
        sums.tokens += float(m.sum())
        sums.clipped += float((pl.clipped & m).sum())
        sums.approx_kl += float((((r - 1) - torch.log(r)) * m).sum())


def per_micro_batch(batch: Batch, size: int, fn, tokens: int | None = None) -> list[torch.Tensor | None]:
    """Run `fn(micro_batch) -> tuple of (b, t) tensors or None` over micro-batches and stitch
    each result back into a (B, T) tensor (micro-batches are trimmed, so t <= T). Micro-batches
    are `size` rows, or with `tokens` packed padding-free forwards of at most that many tokens
    (`trainers.packing`)."""
    b, width = len(batch), batch.completion_len
    results: list[torch.Tensor | None] = []
    for rows in split_rows(batch, torch.arange(b), size, tokens):
        for i, x in enumerate(fn(micro_batch(batch, rows, tokens is not None))):
            if i == len(results):
                results.append(None if x is None else torch.zeros(b, width))
            if x is not None:
                results[i][rows, : x.shape[1]] = x.float()
    return results
