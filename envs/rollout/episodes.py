"""Finished runs as `Episode`s, with the metadata every rollout's episodes record (turn-based ones
here, agent episodes in `envs.agent.env`): enough to reproduce each."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlvr.envs.episode import Episode
from rlvr.envs.rollout.episode_run import EpisodeRun
from rlvr.envs.rollout.request import RolloutRequest
from rlvr.verifiers.verdict import Outcome, Verdict


def verifier_version(verdict: Verdict | None) -> str | None:
    """The verifier's version as its verdict names it, if it does."""
    info = verdict.info if verdict is not None else {}
    return info.get("verifier_version") or info.get("verifier")


def episode_metadata(
    env_version: Any,
    env_kwargs: Mapping[str, Any],
    seed: int | None,
    verifier: str | None,
    model_info: Mapping[str, Any],
    sampling: Mapping[str, Any],
    max_length: int | None,
) -> dict[str, Any]:
    """How an episode was made, as every rollout's episodes record it (turn-based ones here, agent
    episodes in `envs.agent.env`): the env and its arguments, the reset seed, the verifier, the model
    and its step, the sampling settings, and the context the episode had to fit in."""
    return {
        "env_version": env_version,
        "env_kwargs": dict(env_kwargs),
        "seed": seed,
        "verifier": verifier,
        **{k: v for k, v in model_info.items() if k != "step"},
        "model": model_info.get("model"),
        "model_step": model_info.get("model_step", model_info.get("step")),
        "sampling": dict(sampling),
        "max_length": max_length,
    }


def to_episode(run: EpisodeRun, request: RolloutRequest, sampling: dict[str, Any]) -> Episode:
    """`run`, finished, as the `Episode` of `request` (`envs.rollout.entry` resolved its defaults);
    `sampling`: its sampling settings as a dict, made once per rollout (`asdict` is slow)."""
    env = run.env.unwrapped
    verdict = run.verdict
    verifier = verifier_version(verdict) or getattr(env, "verifier_version", None)
    version = getattr(env, "version", None)
    metadata = {
        **episode_metadata(
            version, request.env_args, run.seed, verifier, request.model_info, sampling, request.max_length
        ),
        "turns": run.turns,
        "detail": run.note or (verdict.detail if verdict else ""),
    }
    if run.error is not None:
        metadata["error"] = run.error
    return Episode(
        env_id=request.env,
        task_id=run.task_id,
        group_id=run.group,
        prompt_ids=list(run.prompt_ids),
        completion_ids=run.completion_ids,
        loss_mask=run.loss_mask,
        logprobs=[float(x) for x in run.logprobs],
        turn_rewards=run.turn_rewards,
        outcome=run.outcome or Outcome.ERROR,
        messages=run.messages,
        finish_reason=run.finish_reason,
        metadata=metadata,
        truncation=run.truncation if run.outcome is Outcome.TRUNCATED else None,
        versions=run.versions if any(v >= 0 for v in run.versions) else [],
    )
