"""The one bound on a log-ratio of two policies' logprobs, shared by every kernel that takes exp() of
one (the policy loss's importance ratio, the rollout correction's weights, the KL estimators).

Rule: |log ratio| is clamped to `MAX_LOG_RATIO` = 20 before any exp(). Why: exp(88) overflows
float32, and exp of a log-ratio also appears squared or in a gradient; two policies that disagree by
e^20 on a token disagree completely anyway, so the clamp changes no meaningful number. One constant,
so that the kernels cannot drift apart.
"""

from __future__ import annotations

from torch import Tensor

MAX_LOG_RATIO = 20.0


def clamp_log_ratio(log_ratio: Tensor) -> Tensor:
    """`log_ratio` (any shape) clamped to [-MAX_LOG_RATIO, MAX_LOG_RATIO]."""
    return log_ratio.clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO)
