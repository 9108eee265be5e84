"""Gymnasium environments for text tasks, the rollout that runs a sampler in them, and evaluation.

The contract an environment author reads is at this folder's top (`core`: `TextEnv`, `EnvKind`;
`registry`, `sampler`, `episode`, `checker`, `tool_env`, `tools`, ...); the rollout engine is
`envs.rollout`, agent programs as environments `envs.agent`, the built-in environments
`envs.tasks`, and the adapters that serve environments to TRL and verl `envs.adapters` (imported
only when used).

Importing `envs` registers the built-in `rlvr/` environments with Gymnasium's registry and loads the
third-party ones declared under the `rlvr.envs` entry point (a plugin that fails to load is a
warning, not an error), so that plain `gymnasium.make("ns/Name-v0")` finds both; `envs.make` also
loads plugins installed later."""

from rlvr.envs.checker import CheckResult, EnvCheckError, check_env
from rlvr.envs.core import (
    EnvError,
    EnvKind,
    Message,
    MultiTurnEnv,
    ProceduralTasks,
    SingleTurnEnv,
    StepAfterDoneError,
    Task,
    TaskNotFoundError,
    TextEnv,
    TurnResult,
)
from rlvr.envs.episode import Episode, TruncationReason
from rlvr.envs.registry import (
    EnvArgumentError,
    EnvInfo,
    PluginFailure,
    UnknownEnvError,
    list_envs,
    load_plugins,
    make,
    parse_env_args,
    register_builtins,
)
from rlvr.envs.rollout import Group, RolloutRequest, rollout
from rlvr.envs.sampler import FinishReason, Sample, Sampler, SamplingSettings
from rlvr.envs.tool_env import ToolEnv
from rlvr.envs.tools import Tool, ToolCall, ToolCallParser, ToolOutput, ToolSpecError, ToolUnavailableError

register_builtins()
load_plugins(warn=True)  # last: a plugin may itself `from envs import SingleTurnEnv`

__all__ = [
    "CheckResult",
    "EnvArgumentError",
    "EnvCheckError",
    "EnvError",
    "EnvInfo",
    "EnvKind",
    "Episode",
    "FinishReason",
    "Group",
    "Message",
    "MultiTurnEnv",
    "PluginFailure",
    "ProceduralTasks",
    "RolloutRequest",
    "Sample",
    "Sampler",
    "SamplingSettings",
    "SingleTurnEnv",
    "StepAfterDoneError",
    "Task",
    "TaskNotFoundError",
    "TextEnv",
    "Tool",
    "ToolCall",
    "ToolCallParser",
    "ToolEnv",
    "ToolOutput",
    "ToolSpecError",
    "ToolUnavailableError",
    "TruncationReason",
    "TurnResult",
    "UnknownEnvError",
    "check_env",
    "list_envs",
    "load_plugins",
    "make",
    "parse_env_args",
    "register_builtins",
    "rollout",
]
