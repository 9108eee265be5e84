"""`RolloutPlan`: one rollout call's settings as its schedules and their helpers read them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlvr.envs.sampler import SamplingSettings, Tokenizer


@dataclass(frozen=True)
class RolloutPlan:
    """One `rollout` call's settings, fixed for the call: what the schedules and their helpers
    read (one value passed down, instead of the same seven arguments threaded through each)."""

    make_env: Callable[[], Any]  # a fresh env of the call's id and kwargs (the call closes it at its end)
    starts: tuple[tuple[str | None, int | None], ...]  # per group: (task id, None) or (None, reset seed)
    tokenizer: Tokenizer
    group_size: int  # G
    sampling: SamplingSettings  # turn 0's; later turns' seeds follow from it (`seeded`)
    limit: int | None  # the longest prompt a turn may start from: max_length - max_tokens; None: no limit
    group_id_start: int
