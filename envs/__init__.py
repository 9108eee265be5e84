"""Gymnasium environments for text tasks, the rollout that runs a sampler in them, and evaluation.

Importing `envs` registers the built-in `rlvr/` environments with Gymnasium's registry; `make`
also discovers third-party environments declared under the `rlvr.envs` entry point."""
from envs.checker import CheckResult, EnvCheckError, check_env
from envs.core import (
    EnvError,
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
from envs.episode import Episode
from envs.registry import (
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
from envs.sampler import FinishReason, Sample, Sampler, SamplingSettings

register_builtins()

__all__ = [
    "CheckResult", "EnvArgumentError", "EnvCheckError", "EnvError", "EnvInfo", "Episode", "FinishReason", "Message",
    "MultiTurnEnv", "PluginFailure", "ProceduralTasks", "Sample", "Sampler", "SamplingSettings", "SingleTurnEnv",
    "StepAfterDoneError", "Task", "TaskNotFoundError", "TextEnv", "TurnResult", "UnknownEnvError", "check_env",
    "list_envs", "load_plugins", "make", "parse_env_args", "register_builtins",
]
