"""How long the trainer's sequences may be: the context length (`max_model_len`) and the KV cache a
sequence needs (`sequence_tokens`), which size the sampler."""

from __future__ import annotations

from typing import Any

from rlvr.trainers.config import TrainConfig

PROBE_TASKS = 64  # opening prompts measured to size the sampler's KV cache


def sequence_tokens(config: TrainConfig, tokenizer: Any, max_len: int) -> int:
    """Tokens a sequence needs in the sampler's KV cache: for a single-step environment twice the
    longest opening prompt of `PROBE_TASKS` tasks (room for longer ones not drawn) plus
    `max_tokens`; for a multi-turn one, whose context grows turn by turn, the whole `max_len`.
    A sequence longer than this still runs, with fewer beside it."""
    from rlvr.envs import EnvKind, make
    from rlvr.envs.chat_template import template_ids

    env = make(config.env, disable_env_checker=True, **config.env_args)
    try:
        if getattr(env.unwrapped, "kind", None) != EnvKind.SINGLE_STEP:
            return max_len
        longest = max(
            len(template_ids(tokenizer, env.reset(seed=s)[0], add_generation_prompt=True)) for s in range(PROBE_TASKS)
        )
    finally:
        env.close()
    return min(max_len, 2 * longest + config.max_tokens)


def max_model_len(policy: Any) -> int:
    """Context length for the sampler and for multi-turn rollouts: the model's, capped."""
    return min(int(getattr(policy.config, "max_position_embeddings", 4096)), 4096)
