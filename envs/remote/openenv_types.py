"""OpenEnv's typed messages for rlvr's environments (openenv-core 0.3.0's `Action`, `Observation`, `State`).

- action: `{"completion": TEXT}`, the model's text for this turn (what `env.step` takes);
- observation: `messages` (the environment's messages: the prompt after a reset, the reply after a step, empty
  when the episode ends), `terminated`, `truncated` and `info` (the environment's info as JSON, its `verdict`
  as `{"score", "outcome", "detail", "info"}`), besides OpenEnv's own `reward` and `done` (`terminated or
  truncated`);
- state: OpenEnv's `episode_id` and `step_count`, and the environment's id, version and kind, the task's id and
  whether an episode is running.

The classes are made when first asked for (`openenv_types()`), so that nothing imports OpenEnv before a server or
a client is made; without the `serve` extra, `require_openenv` says so in one line.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from rlvr.errors import require_extra

# What the server and the client import, by import name -> distribution (pyproject.toml's `serve` extra).
SERVE_MODULES = {"openenv": "openenv-core", "fastmcp": "fastmcp", "fastapi": "fastapi", "uvicorn": "uvicorn",
                 "websockets": "websockets"}  # fmt: skip


@dataclass(frozen=True)
class OpenEnvTypes:
    """The three pydantic models OpenEnv's server validates against and its clients parse."""

    action: type
    observation: type
    state: type


def require_openenv(what: str) -> None:
    """`MissingExtraError` naming the first package of the `serve` extra that is not installed."""
    require_extra(what, "serve", SERVE_MODULES)


@functools.cache
def openenv_types() -> OpenEnvTypes:
    require_openenv("an rlvr environment served through OpenEnv")
    from openenv.core.env_server.types import Action, Observation, State
    from pydantic import Field

    class RlvrAction(Action):
        """The model's text for this turn."""

        completion: str = Field(description="the model's text for this turn (what the environment's step takes)")

    class RlvrObservation(Observation):
        """The environment's messages and verdict for the last reset or step (`reward` null after a reset)."""

        messages: list[dict[str, Any]] = Field(
            default_factory=list, description="chat messages: the prompt after a reset, the reply after a step"
        )
        terminated: bool = Field(default=False, description="the episode ended (done = terminated or truncated)")
        truncated: bool = Field(default=False, description="the episode was cut (e.g. at its turn limit)")
        info: dict[str, Any] = Field(
            default_factory=dict, description="the environment's info: task_id, env_version, and after a step verdict"
        )

    class RlvrState(State):
        """Which environment, which task, and how far the episode is."""

        env_id: str = ""
        env_version: str = ""
        kind: str = ""
        task_id: str | None = None
        running: bool = False

    return OpenEnvTypes(RlvrAction, RlvrObservation, RlvrState)
