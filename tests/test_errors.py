"""One error root: every error rlvr raises on purpose is an `RlvrError`, so one clause catches
them all (and the CLI prints each as one line)."""

from __future__ import annotations

import pytest

from rlvr import envs
from rlvr.errors import RlvrError


def test_every_package_s_errors_derive_from_the_root():
    from rlvr.cli import UsageError
    from rlvr.envs.core import EnvError
    from rlvr.envs.episode_log import EpisodeLogError
    from rlvr.envs.tasks.code import TaskRecordError
    from rlvr.sandbox import ImageBuildError, SandboxError
    from rlvr.trainers.checkpoint import CheckpointError
    from rlvr.trainers.config import ConfigError
    from rlvr.trainers.models import ModelError
    from rlvr.trainers.samplers.openai_sampler import SamplerError
    from rlvr.verifiers.code import TestSpecError
    from rlvr.verifiers.verdict import VerifierError

    for cls in (
        EnvError,
        EpisodeLogError,
        TaskRecordError,
        UsageError,
        SandboxError,
        ImageBuildError,
        CheckpointError,
        ConfigError,
        ModelError,
        SamplerError,
        TestSpecError,
        VerifierError,
    ):
        assert issubclass(cls, RlvrError), cls


def test_one_clause_catches_a_malformed_env_id_and_a_bad_argument():
    with pytest.raises(RlvrError):
        envs.make("rlvr/NoSuchEnv-v0")
    with pytest.raises(RlvrError):
        envs.make("rlvr/Arithmetic-v0", difficulty="hard")
    with pytest.raises(RlvrError):
        envs.make("rlvr/Code-v0", scoring="sometimes")  # the constructor's ValueError, wrapped


def test_the_errors_that_escaped_the_root_are_under_it_and_keep_their_other_bases():
    from rlvr.sandbox.errors import SandboxError
    from rlvr.sandbox.pool import Unavailable
    from rlvr.trainers.batch import BatchError
    from rlvr.verifiers.code import HarnessError
    from rlvr.verifiers.math.bounded import JobTimeout, PoolError, PoolTimeout
    from rlvr.verifiers.verdict import VerifierError

    for cls in (HarnessError, Unavailable, BatchError, PoolError, PoolTimeout, JobTimeout):
        assert issubclass(cls, RlvrError), cls
    assert issubclass(Unavailable, SandboxError)  # through its package's base
    assert issubclass(BatchError, ValueError)  # existing `except ValueError` clauses still catch it
    assert issubclass(PoolError, RuntimeError)
    # A grader's failure is no misuse: `compose` re-raises a VerifierError, and turns these into `error` verdicts.
    assert not issubclass(HarnessError, VerifierError) and not issubclass(PoolError, VerifierError)


def test_a_composed_component_s_harness_failure_is_still_an_error_verdict():
    from rlvr.verifiers.code import HarnessError
    from rlvr.verifiers.compose import weighted
    from rlvr.verifiers.verdict import Outcome

    def broken(response: str, gold: str):
        raise HarnessError("the sandbox is down")

    verdict = weighted({"code": (broken, 1.0)})("x", "y")
    assert verdict.outcome is Outcome.ERROR and "the sandbox is down" in verdict.detail
