"""One error root: every error rlvr raises on purpose is an `RlvrError`, so one clause catches
them all (and the CLI prints each as one line)."""
from __future__ import annotations

import pytest

import envs
from sandbox import RlvrError


def test_every_package_s_errors_derive_from_the_root():
    from envs.code import TaskRecordError
    from envs.core import EnvError
    from envs.episode_log import EpisodeLogError
    from rlvr.cli import UsageError
    from sandbox import ImageBuildError, SandboxError
    from trainers.checkpoint import CheckpointError
    from trainers.config import ConfigError
    from trainers.models import ModelError
    from trainers.samplers.openai_sampler import SamplerError
    from verifiers.code import TestSpecError
    from verifiers.verdict import VerifierError

    for cls in (EnvError, EpisodeLogError, TaskRecordError, UsageError, SandboxError, ImageBuildError, CheckpointError,
                ConfigError, ModelError, SamplerError, TestSpecError, VerifierError):
        assert issubclass(cls, RlvrError), cls


def test_one_clause_catches_a_malformed_env_id_and_a_bad_argument():
    with pytest.raises(RlvrError):
        envs.make("rlvr/NoSuchEnv-v0")
    with pytest.raises(RlvrError):
        envs.make("rlvr/Arithmetic-v0", difficulty="hard")
    with pytest.raises(RlvrError):
        envs.make("rlvr/Code-v0", scoring="sometimes")  # the constructor's ValueError, wrapped
