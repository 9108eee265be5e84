"""A task named so that another process can rebuild it, and the environments the adapters serve.

A `TaskKey` is what crosses into another trainer's data: the environment's id, its keyword arguments
(plain JSON data), its version, the task's id (`options={"task_id": ...}` rebuilds the task, the env
contract's way), and a digest of the task's prompt. The reward rebuilds the task from the key and
compares digests, so that a row made by other code (an environment changed since the export, other
arguments) is refused rather than graded against a task the model never saw.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from rlvr.envs.core import EnvError, EnvKind, TextEnv
from rlvr.envs.registry import make


class AdapterError(EnvError, ValueError):
    """An environment or a row the adapters cannot serve: a multi-turn environment, arguments that are
    not plain data, a row that names no task, a task that cannot be rebuilt as it was prompted."""


def plain_args(env_args: Mapping[str, Any] | None) -> dict[str, Any]:
    """`env_args` as a dict that survives JSON unchanged (it travels in each row), else `AdapterError`."""
    args = dict(env_args or {})
    try:
        same = json.loads(json.dumps(args, sort_keys=True)) == args
    except (TypeError, ValueError):
        same = False
    if not same:
        raise AdapterError(
            f"environment arguments must be plain JSON data (str, int, float, bool, None, lists, dicts) to travel "
            f"in a row, got {args!r}"
        )
    return args


def prompt_digest(messages: Sequence[Mapping[str, Any]]) -> str:
    """16 hex digits of SHA-256 over the prompt's (role, content) pairs: what the model was shown."""
    pairs = [[str(m.get("role")), str(m.get("content"))] for m in messages]
    return hashlib.sha256(json.dumps(pairs, ensure_ascii=False).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class TaskKey:
    """One task of one environment, as a row carries it (`to_json`, `from_json`)."""

    env_id: str
    task_id: str
    env_version: str
    prompt_digest: str
    env_args: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, data: str | Mapping[str, Any]) -> TaskKey:
        """The key a row holds: its JSON text (or the dict it parses to); `AdapterError` for anything else."""
        not_a_key = "a row's task is not an rlvr task key (the JSON rlvr's adapters write)"
        try:
            fields = json.loads(data) if isinstance(data, str) else dict(data)
        except (TypeError, ValueError) as exc:
            raise AdapterError(f"{not_a_key}: {exc}") from None
        texts = {"env_id", "task_id", "env_version", "prompt_digest"}
        if not isinstance(fields, dict) or set(fields) != texts | {"env_args"}:
            shown = sorted(fields) if isinstance(fields, dict) else type(fields).__name__
            raise AdapterError(f"{not_a_key}: expected the fields {sorted(texts | {'env_args'})}, got {shown}")
        if not all(isinstance(fields[n], str) for n in texts) or not isinstance(fields["env_args"], dict):
            raise AdapterError(f"a row's task key has a field of the wrong type: {fields!r}")
        return cls(**fields)


def open_env(env_id: str, env_args: Mapping[str, Any] | None = None):
    """`envs.make(env_id, **env_args)`, checked to be one the adapters serve: a single-step `TextEnv`
    (one prompt, one completion, one reward). Returns the made (wrapped) environment."""
    args = plain_args(env_args)
    try:
        env = make(env_id, **args)
    except OSError as exc:  # e.g. path= a missing file
        raise AdapterError(f"environment {env_id} with {args}: {exc.strerror or exc}") from None
    inner = env.unwrapped
    if not isinstance(inner, TextEnv):
        env.close()
        raise AdapterError(f"{env_id} is not an rlvr text environment ({type(inner).__name__})")
    if inner.kind != EnvKind.SINGLE_STEP:
        env.close()
        raise AdapterError(
            f"{env_id} is a {inner.kind} environment: the TRL and verl adapters serve single-step environments "
            "only (one prompt, one completion, one reward); train it with `rlvr train`"
        )
    return env
