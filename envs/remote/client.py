"""`RemoteEnv`: an environment served by `rlvr serve` (or any server of rlvr's OpenEnv types), a Gymnasium env again.

It talks through OpenEnv's own client (`GenericEnvClient`, synchronous through `.sync()`) over one WebSocket: one
session on the server, hence one environment there, for as long as the `RemoteEnv` is open. `reset` and `step`
return what the served environment's do, the same observations, rewards, flags and info (its `verdict` a `Verdict`
again; other values as their JSON). As a local environment, it refuses a completion that is not text (`TypeError`)
and a step with no episode running (`StepAfterDoneError`) before anything is sent; an error the server answers is a
`RemoteEnvError` in one line, after which the session goes on.

    env = RemoteEnv("http://127.0.0.1:8000")
    messages, info = env.reset(seed=3)
    reply, reward, terminated, truncated, info = env.step("... \\boxed{7}")
    env.close()
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from rlvr.envs.core import MessagesSpace, StepAfterDoneError, TextSpace
from rlvr.envs.remote.openenv_types import require_openenv
from rlvr.envs.remote.wire import RemoteEnvError, info_from_wire, one_line


class RemoteEnv(gym.Env[list, str]):
    """An environment on a server, played through OpenEnv's client (see the module docstring)."""

    metadata = {"render_modes": []}

    def __init__(self, url: str, connect_timeout_s: float = 10.0, message_timeout_s: float = 300.0):
        require_openenv("RemoteEnv")
        from openenv.core.generic_client import GenericEnvClient

        self.url = url
        self.observation_space = MessagesSpace()
        self.action_space = TextSpace()
        self._running = False
        self._client = GenericEnvClient(
            base_url=url, connect_timeout_s=connect_timeout_s, message_timeout_s=message_timeout_s
        ).sync()
        try:
            self._call("connect to", self._client.connect)
            state = self._call("ask", self._client.state)
        except RemoteEnvError:
            self.close()  # the client's event-loop thread too
            raise
        self.env_id, self.env_version = state.get("env_id"), state.get("env_version")

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        data: dict[str, Any] = {}
        if seed is not None:
            data["seed"] = seed
        if options:
            data["options"] = dict(options)
        result = self._call("reset", self._client.reset, **data)
        self._running = True
        return result.observation.get("messages", []), info_from_wire(result.observation.get("info", {}))

    def step(self, action: str):
        if not isinstance(action, str):
            raise TypeError(f"action must be the model's text (str), got {type(action).__name__}")
        if not self._running:
            raise StepAfterDoneError("the episode is over: call reset() before step()")
        result = self._call("step", self._client.step, {"completion": action})
        seen = result.observation
        terminated, truncated = bool(seen.get("terminated", result.done)), bool(seen.get("truncated", False))
        self._running = not (terminated or truncated)
        reward = float(result.reward) if result.reward is not None else 0.0
        return seen.get("messages", []), reward, terminated, truncated, info_from_wire(seen.get("info", {}))

    def state(self) -> dict[str, Any]:
        """The server's state of this session: episode_id, step_count, env_id, env_version, kind, task_id, running."""
        return self._call("ask", self._client.state)

    def close(self) -> None:
        client, self._client = getattr(self, "_client", None), None
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing a connection the server already dropped
                pass

    def _call(self, what: str, method: Any, *args: Any, **kwargs: Any) -> Any:
        if self._client is None:
            raise RemoteEnvError(f"RemoteEnv({self.url!r}) is closed")
        try:
            return method(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - refused, dropped, timed out, or an error message: one line
            # (OpenEnv's client raises RuntimeError("Server error: MESSAGE (code: CODE)") for an error message)
            raise RemoteEnvError(f"{self.url}: could not {what}: {one_line(str(exc))}") from exc
