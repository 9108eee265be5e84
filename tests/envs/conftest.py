"""Fixtures of the environment tests. One vLLM engine of the tiny model serves the rollout tests of
this folder (tests/envs/test_rollout.py and test_rollout_per_episode.py): an engine start and
close cost seconds, and these tests only sample from it (none loads weights or changes it)."""

from __future__ import annotations

import importlib.util

import pytest

from tests.conftest import require


@pytest.fixture(scope="package")
def tiny_engine():
    """A `VLLMSampler` of the shipped tiny model, 512 tokens of context, closed after this folder's
    last test."""
    require(importlib.util.find_spec("vllm") is not None, "vllm is not installed")
    from rlvr.trainers.models import resolve_model
    from rlvr.trainers.samplers import VLLMSampler

    with VLLMSampler(str(resolve_model("tiny")), max_model_len=512) as engine:
        yield engine
