"""Gymnasium environments for text tasks, the rollout that runs a sampler in them, and evaluation."""
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
)
from envs.episode import Episode
from envs.sampler import Sample, Sampler, SamplingSettings

__all__ = [
    "EnvError", "Episode", "Message", "MultiTurnEnv", "ProceduralTasks", "Sample", "Sampler",
    "SamplingSettings", "SingleTurnEnv", "StepAfterDoneError", "Task", "TaskNotFoundError", "TextEnv",
]
