"""What crosses between `rlvr serve` and its clients: an episode's turn as plain JSON, and the errors of each side.

A turn is what `reset` or `step` returned, every part of it JSON: the messages (the observation), the reward (None
after a reset), `terminated`, `truncated`, and `info`, whose `verdict` travels as `Verdict.to_dict()` and comes back
a `Verdict` (`info_from_wire`). Dataclasses travel as dicts, enums as their values, tuples as lists, numpy scalars
and arrays as numbers and lists; anything else as its `str` (an environment's info is plain data by contract).

No third-party import here: the server and the client each import OpenEnv themselves.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rlvr.envs.core import EnvError
from rlvr.verifiers.verdict import Outcome, Verdict

# The openenv-core release whose protocol (types, routes, WebSocket messages) the server and the client follow.
OPENENV_VERSION = "0.3.0"


class RequestError(EnvError, ValueError):
    """A request the served environment refuses (a bad seed or option, a completion that is not text): the client's
    mistake, answered with `status` and one line, and the session goes on."""

    status = 400


class NotReadyError(RequestError):
    """A step with no episode running: before any reset, after the episode ended, or over plain HTTP (each request
    a fresh environment in OpenEnv)."""

    status = 409


class ServeError(EnvError, RuntimeError):
    """The server cannot start: an environment it cannot serve, an address it cannot listen on."""


class RemoteEnvError(EnvError, RuntimeError):
    """A `RemoteEnv` whose server is unreachable or answered an error."""


@dataclass(frozen=True)
class Turn:
    """One reset or step of a served environment, JSON-safe: the observation's `messages`, `reward` (None after
    a reset), `terminated`, `truncated` and `info`."""

    messages: list[dict[str, Any]]
    reward: float | None = None
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


def to_wire(value: Any) -> Any:
    """`value` as plain JSON data (see the module docstring)."""
    if value is None or isinstance(value, (bool, int, float, str)) and not isinstance(value, enum.Enum):
        return value
    if isinstance(value, Verdict):
        return to_wire(value.to_dict())
    if isinstance(value, enum.Enum):
        return to_wire(value.value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_wire(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_wire(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_wire(v) for v in value]
    if hasattr(value, "tolist"):  # numpy scalars and arrays (numpy itself is not imported for this)
        return to_wire(value.tolist())
    return str(value)


def info_from_wire(info: Mapping[str, Any]) -> dict[str, Any]:
    """The info a local environment returns, from its JSON: `verdict` a `Verdict` again, the rest as sent."""
    out = dict(info)
    verdict = out.get("verdict")
    if isinstance(verdict, Mapping):
        score, outcome = float(verdict["score"]), Outcome(verdict["outcome"])
        out["verdict"] = Verdict(score, outcome, verdict.get("detail", ""), dict(verdict.get("info", {})))
    return out


def one_line(text: str) -> str:
    """`text` on one line (an error message that crosses the wire)."""
    return " ".join(str(text).split())
