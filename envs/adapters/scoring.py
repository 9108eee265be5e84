"""A completion of a task named by a `TaskKey`, scored by the task's own environment into a typed `Score`.

The environment is rebuilt from the key (one per environment and arguments, per thread: an environment
serves one episode at a time), reset onto the task by its id, checked against the key's prompt digest,
and stepped with the completion; the step's reward and its verdict's outcome are the score. As in rlvr's
own rollout:
- a verifier that fails (`error` verdict) or an environment that raises while stepping is an `error`
  score whose reward is None: the grader failed, not the model, so it is no reward at all, never a 0;
- a completion cut at the token limit (`cut=True`) is `truncated` and earns 0, unless the environment
  grades cut text (`TextEnv.grade_truncated`).
A key that names no environment, a task that is not found, or a task whose prompt changed since the key
was made is a setup problem that every row would meet: `AdapterError`, raised.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass

from rlvr.envs.adapters.keys import AdapterError, TaskKey, open_env, prompt_digest
from rlvr.envs.core import EnvError, TaskNotFoundError
from rlvr.verifiers.verdict import Outcome, Verdict


class GraderFailedError(EnvError, RuntimeError):
    """A grader failure (an `error` score) where a caller must have a reward (verl's `on_error="raise"`)."""


@dataclass(frozen=True)
class Score:
    """How one completion scored: `reward` in the environment's reward range, or None for an `error`
    (the grader failed); `outcome` the verdict's; `detail` its short reason."""

    reward: float | None
    outcome: Outcome
    detail: str = ""


class TaskScorer:
    """Scores completions on tasks named by keys; safe to call from several threads."""

    def __init__(self) -> None:
        self._local = threading.local()

    def _env(self, key: TaskKey):
        envs = self._local.__dict__.setdefault("envs", {})
        name = (key.env_id, json.dumps(key.env_args, sort_keys=True))
        if name not in envs:
            envs[name] = open_env(key.env_id, key.env_args)
        return envs[name]

    def score(self, key: TaskKey, completion: str, cut: bool = False) -> Score:
        """The environment's judgement of `completion` on the task `key` names (see the module docstring)."""
        if not isinstance(completion, str):
            raise TypeError(f"a completion must be text (str), got {type(completion).__name__}")
        env = self._env(key)
        try:
            prompt, _ = env.reset(options={"task_id": key.task_id})
        except TaskNotFoundError as exc:
            raise AdapterError(f"{key.env_id} has no task {key.task_id!r}: {exc}") from None
        if prompt_digest(prompt) != key.prompt_digest:
            raise AdapterError(
                f"{key.env_id} task {key.task_id!r} is not the task this row was made with (its prompt differs; "
                f"the row: version {key.env_version}, now {env.unwrapped.version}): make the rows again"
            )
        try:
            _, reward, _, _, info = env.step(completion)
        except Exception as exc:  # noqa: BLE001 - an env or verifier crash is this sample's error, as in a rollout
            return Score(None, Outcome.ERROR, f"{type(exc).__name__}: {exc}")
        verdict = info.get("verdict")
        if not isinstance(verdict, Verdict):
            return Score(None, Outcome.ERROR, f"env.step returned no Verdict (got {type(verdict).__name__})")
        if verdict.is_error:
            return Score(None, Outcome.ERROR, verdict.detail or "the verifier failed")
        if cut:
            graded = getattr(env.unwrapped, "grade_truncated", False)
            outcome = Outcome.CORRECT if graded and verdict.outcome is Outcome.CORRECT else Outcome.TRUNCATED
            return Score(float(reward) if graded else 0.0, outcome, "cut at the token limit")
        return Score(float(reward), verdict.outcome, verdict.detail)

    def close(self) -> None:
        """Close this thread's environments (others' close with their threads)."""
        for env in self._local.__dict__.pop("envs", {}).values():
            env.close()
