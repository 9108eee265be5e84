"""One client's episodes of one environment, as the server plays them: requests checked, turns made JSON-safe.

`EnvSession` holds one made environment and answers `reset(seed, options, episode_id)` and `step(completion)` with
`Turn`s; a request the environment would refuse, or one that cannot cross the wire (`options={"task": Task}`), is a
`RequestError` in one line before the environment sees it, and a step with no episode running a `NotReadyError`.
Nothing here imports OpenEnv: `server.py` puts a session behind OpenEnv's `Environment`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from rlvr.envs.core import EnvKind, TaskNotFoundError, TextEnv
from rlvr.envs.registry import make
from rlvr.envs.remote.wire import NotReadyError, RequestError, ServeError, Turn, one_line, to_wire

RESET_OPTIONS = ("task_id",)  # what of `reset(options=...)` crosses the wire (a `Task` object does not)


@dataclass(frozen=True)
class ServedEnv:
    """The environment a server serves: its id and arguments, and how each session makes its copy (`make`:
    `rlvr.envs.make(env_id, **env_args)` unless given)."""

    env_id: str
    env_args: dict[str, Any] = field(default_factory=dict)
    make: Callable[[], gym.Env] | None = None

    def new(self) -> gym.Env:
        return self.make() if self.make is not None else make(self.env_id, **self.env_args)


def check_servable(env: gym.Env, env_id: str) -> TextEnv:
    """The rlvr environment inside `env`, if it can be played by reset and step over the wire; `ServeError` if not."""
    inner = env.unwrapped
    if not isinstance(inner, TextEnv):
        raise ServeError(f"{env_id} is not an rlvr text environment ({type(inner).__name__}): rlvr serve serves those")
    if inner.kind == EnvKind.AGENT:
        raise ServeError(
            f"{env_id} is an agent environment: an agent program makes its model calls through rlvr's gateway, so "
            "it is not played by reset and step; train it with `rlvr train`"
        )
    return inner


class EnvSession:
    """One environment made for one client (a WebSocket session, or one HTTP request); its episodes in turn."""

    def __init__(self, served: ServedEnv):
        self.served = served
        self.env = served.new()
        self.inner = check_servable(self.env, served.env_id)
        self.episode_id: str | None = None
        self.task_id: str | None = None
        self.steps = 0
        self.running = False

    def reset(self, seed: Any = None, options: Any = None, episode_id: Any = None, **unknown: Any) -> Turn:
        if unknown:
            raise RequestError(f"reset takes seed, options and episode_id; got {', '.join(sorted(unknown))}")
        if seed is not None and (type(seed) is not int or seed < 0):
            raise RequestError(f"seed must be a non-negative integer or null, got {seed!r}")
        if options is not None and not isinstance(options, Mapping):
            raise RequestError(f"options must be an object such as {{'task_id': '12'}}, got {options!r}")
        extra = sorted(set(options or {}) - set(RESET_OPTIONS))
        if extra:
            raise RequestError(f"reset options over the wire: {', '.join(RESET_OPTIONS)}; got {', '.join(extra)}")
        task_id = (options or {}).get("task_id")
        if task_id is not None and (type(task_id) not in (str, int)):
            raise RequestError(f"options.task_id must be a string or an integer, got {task_id!r}")
        if episode_id is not None and not isinstance(episode_id, str):
            raise RequestError(f"episode_id must be a string, got {episode_id!r}")
        try:
            messages, info = self.env.reset(seed=seed, options=dict(options) if options else None)
        except TaskNotFoundError as exc:
            raise RequestError(f"{self.served.env_id}: {one_line(exc.args[0] if exc.args else exc)}") from None
        self.episode_id = episode_id or str(uuid.uuid4())
        self.task_id = str(info.get("task_id")) if info.get("task_id") is not None else None
        self.steps, self.running = 0, True
        return Turn(to_wire(messages), None, False, False, to_wire(info))

    def step(self, completion: Any) -> Turn:
        if not isinstance(completion, str):
            raise RequestError(f"the completion must be text (a string), got {type(completion).__name__}")
        if not self.running:
            raise NotReadyError(
                "no episode is running: reset first (plain HTTP /step always meets a fresh environment in OpenEnv: "
                "play episodes over the WebSocket /ws)"
            )
        messages, reward, terminated, truncated, info = self.env.step(completion)
        self.steps += 1
        self.running = not (terminated or truncated)
        return Turn(to_wire(messages), float(reward), bool(terminated), bool(truncated), to_wire(info))

    def state(self) -> dict[str, Any]:
        """What OpenEnv's `state` shows: the episode's id and step count, and which environment and task."""
        return {
            "episode_id": self.episode_id,
            "step_count": self.steps,
            "env_id": self.served.env_id,
            "env_version": str(self.inner.version),
            "kind": str(self.inner.kind),
            "task_id": self.task_id,
            "running": self.running,
        }

    def close(self) -> None:
        self.env.close()
